// Package helm holds the tests of idgen's Helm chart (idgen/ beside this
// file). It is a module of its own so that the Helm and Kubernetes packages
// the tests render the chart with stay out of idgen's go.mod: run them with
// `cd deploy/helm && go test ./...`.
package helm
