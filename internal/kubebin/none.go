//go:build !embedkube

package kubebin

var compressed []byte
