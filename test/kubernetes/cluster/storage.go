package cluster

import (
	"context"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// StorageClass is the cluster's default StorageClass. Its claims get a
// directory under the cluster's own directory as a hostPath volume (the
// cluster has one node), made by the harness's provisioner.
const StorageClass = "paddock-test-hostpath"

const provisionerName = "paddock.dev/test-hostpath"

// startProvisioner makes the default StorageClass and, until ctx ends,
// binds each pending claim of it to a new hostPath PersistentVolume, and
// deletes released volumes with their directories. It is a test double of
// a storage driver.
func (c *Cluster) startProvisioner(ctx context.Context) error {
	mode := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimRetain
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: StorageClass, Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       provisionerName,
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &mode,
	}
	if _, err := c.Client.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	root := filepath.Join(c.Dir, "volumes")
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopProvisioner = cancel
	go func() {
		// Claims are bound as the API server reports them, as a real
		// storage driver does (a poll's delay would count in every create
		// measured on this cluster); released volumes are swept at the
		// same time and once a second.
		t := time.NewTicker(time.Second)
		defer t.Stop()
		var w watch.Interface
		var events <-chan watch.Event
		defer func() {
			if w != nil {
				w.Stop()
			}
		}()
		for {
			if w == nil {
				if nw, err := c.Client.CoreV1().PersistentVolumeClaims("").Watch(pctx, metav1.ListOptions{}); err == nil {
					w, events = nw, nw.ResultChan()
				}
			}
			c.provisionOnce(pctx, root)
			select {
			case <-pctx.Done():
				return
			case _, ok := <-events:
				if !ok {
					w, events = nil, nil
				}
			case <-t.C:
			}
		}
	}()
	return nil
}

func (c *Cluster) provisionOnce(ctx context.Context, root string) {
	claims, err := c.Client.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, pvc := range claims.Items {
		if pvc.Spec.VolumeName != "" || pvc.Status.Phase != corev1.ClaimPending || pvc.DeletionTimestamp != nil {
			continue
		}
		if pvc.Spec.StorageClassName == nil || *pvc.Spec.StorageClassName != StorageClass {
			continue
		}
		name := "pv-" + string(pvc.UID)
		dir := filepath.Join(root, name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			c.log.Warn("provisioner: mkdir", "err", err)
			continue
		}
		dirType := corev1.HostPathDirectory
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"paddock.dev/test-provisioner": "1"}},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
				AccessModes:                   pvc.Spec.AccessModes,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              StorageClass,
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID},
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &dirType}},
			},
		}
		if _, err := c.Client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			c.log.Warn("provisioner: create PV", "err", err)
		}
	}
	vols, err := c.Client.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{LabelSelector: "paddock.dev/test-provisioner=1"})
	if err != nil {
		return
	}
	for _, pv := range vols.Items {
		if pv.Status.Phase != corev1.VolumeReleased {
			continue
		}
		if err := c.Client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err == nil || apierrors.IsNotFound(err) {
			_ = os.RemoveAll(filepath.Join(root, pv.Name))
		}
	}
}
