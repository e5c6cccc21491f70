//go:build embedkube

package kubebin

import _ "embed"

//go:embed paddock-kubernetes.gz
var compressed []byte
