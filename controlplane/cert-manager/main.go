// Command cert-manager-controller runs the part of cert-manager's controller that issues
// certificates from Issuers of type selfSigned and ca, for the dev plane.
//
// cert-manager's own controller command lives in a nested Go module (cmd/controller) that the
// module proxy does not serve, so this wrapper assembles the same controllers from the library
// packages of the root module, which it does serve. What is left out, and why:
//   - ACME, Vault and Venafi issuers, ingress/gateway shims, CertificateSigningRequests: the
//     plane only needs in-cluster PKI (KubeRay's RayClusterMTLS uses selfSigned + ca Issuers);
//   - leader election, the metrics and health servers: one replica on a local plane;
//   - the webhook and cainjector: they validate/default objects and inject CA bundles into
//     webhook configurations; Issuer and Certificate issuance works without them (objects are
//     validated by the CRD schemas only).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	controllerpkg "github.com/cert-manager/cert-manager/pkg/controller"

	// Each import registers its controller (or issuer implementation) in init().
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

// The controllers started by default: everything needed to take a Certificate from creation to
// a Ready condition and a populated Secret with selfSigned and ca (Cluster)Issuers.
var defaultControllers = []string{
	"issuers",
	"clusterissuers",
	"certificaterequests-approver",
	"certificaterequests-issuer-selfsigned",
	"certificaterequests-issuer-ca",
	"certificates-trigger",
	"certificates-key-manager",
	"certificates-request-manager",
	"certificates-issuing",
	"certificates-readiness",
	"certificates-revision-manager",
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the API server to work against")
	namespace := flag.String("namespace", "", "watch only this namespace (default: all)")
	clusterNS := flag.String("cluster-resource-namespace", "cert-manager",
		"namespace of the Secrets referenced by ClusterIssuers")
	names := flag.String("controllers", strings.Join(defaultControllers, ","),
		"comma-separated controllers to run")
	workers := flag.Int("workers", 2, "workers per controller")
	flag.Parse()
	if err := run(*kubeconfig, *namespace, *clusterNS, strings.Split(*names, ","), *workers); err != nil {
		fmt.Fprintln(os.Stderr, "cert-manager-controller:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, namespace, clusterNS string, names []string, workers int) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	factory, err := controllerpkg.NewContextFactory(ctx, controllerpkg.ContextOptions{
		Kubeconfig:    kubeconfig,
		Namespace:     namespace,
		IssuerOptions: controllerpkg.IssuerOptions{ClusterResourceNamespace: clusterNS},
		CertificateOptions: controllerpkg.CertificateOptions{
			// As cert-manager's defaults: retry a failed request after 1h at most, 1m at least.
			CertificateRequestMinimumBackoffDuration: 60_000_000_000,
			CertificateRequestMaximumBackoffDuration: 3_600_000_000_000,
		},
	})
	if err != nil {
		return err
	}
	known := controllerpkg.Known()
	var running []controllerpkg.Interface
	for _, name := range names {
		ctor, ok := known[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("unknown controller %q", name)
		}
		c, err := ctor(factory)
		if err != nil {
			return fmt.Errorf("constructing %s: %w", name, err)
		}
		running = append(running, c)
	}
	// The controllers registered their informers on the shared factories while being
	// constructed; only now can the factories start them.
	shared, err := factory.Build()
	if err != nil {
		return err
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())
	shared.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	errs := make(chan error, len(running))
	for i, c := range running {
		go func(name string, c controllerpkg.Interface) {
			if err := c.Run(workers, ctx); err != nil {
				errs <- fmt.Errorf("%s: %w", name, err)
				return
			}
			errs <- nil
		}(names[i], c)
	}
	fmt.Fprintf(os.Stderr, "cert-manager-controller: running %s\n", strings.Join(names, ","))
	for range running {
		if err := <-errs; err != nil {
			stop()
			return err
		}
	}
	return nil
}
