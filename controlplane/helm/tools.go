//go:build tools

// Package tools keeps the helm command's dependencies in the module graph for `go mod tidy`.
package tools

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
