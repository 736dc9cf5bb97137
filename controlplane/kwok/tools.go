//go:build tools

// Package tools keeps kwok's command dependencies in the module graph for `go mod tidy`.
package tools

import (
	_ "sigs.k8s.io/kwok/pkg/kwok/cmd"
)
