//go:build tools

// Package tools keeps Kueue's manager in the module graph for `go mod tidy`.
package tools

import (
	_ "sigs.k8s.io/kueue/cmd/kueue"
)
