//go:build tools

// Package tools keeps Prometheus's command dependencies in the module graph for `go mod tidy`.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
