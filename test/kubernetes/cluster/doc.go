// Package cluster is the harness of the one-node Kubernetes cluster that
// Paddock's Kubernetes tests run on this host. So far it holds the images
// the cluster's containerd imports, there being no registry here: an OCI
// image layout made from the host's static busybox.
package cluster
