// Wrapper module: pins the Gateway API release whose CRDs the tests install (the CRD YAML is
// read from the downloaded module, see src/kuberay/devenv/gatewayapi.py).
module kuberay.local/controlplane/gateway-api

go 1.24

require sigs.k8s.io/gateway-api v1.4.1
