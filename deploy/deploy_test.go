// Package deploy_test checks the deployment files without running them: the
// Dockerfile, docker-compose.yml (with its nginx configurations) and the
// Kubernetes manifests must agree with each other and with the idgen binary
// (its flags, environment variables, default port and metrics).
package deploy_test
