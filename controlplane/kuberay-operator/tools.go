//go:build tools

// Package tools keeps the upstream operator's main package (the module root, main.go) in the
// module graph so that `go mod tidy` records every checksum its build needs.
package tools

import (
	_ "github.com/ray-project/kuberay/ray-operator"
)
