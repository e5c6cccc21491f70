// Package cluster starts and tears down a one-node Kubernetes cluster on this
// host for tests: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, a containerd of its own, a kubelet, and agent-sandbox's
// CRDs and controller, from the binaries build.sh caches.
//
// Several clusters may run on one host at once: each has its own directory
// for everything it writes, loopback ports chosen free, its own containerd
// socket and state, its own cgroup root, a pod /24 claimed by lock file, and
// a node name of its own. Stop removes all of it, and Leftovers says what,
// if anything, is still there.
package cluster
