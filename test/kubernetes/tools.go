//go:build tools

// Package kubernetes pins the Kubernetes and agent-sandbox commands the test
// cluster is built from, so `go mod tidy` keeps them in this module.
package kubernetes

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/agent-sandbox/cmd/agent-sandbox-controller"
)
