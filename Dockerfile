# The container image of cmd/serve: a static Go binary (no cgo) alone on
# scratch, running as a non-root user. docs/serve.md ("Container
# image and Kubernetes") has the build and run commands and a Deployment
# with liveness and readiness probes.
#
#   docker build -t proxgen-serve .
#   docker run -p 8080:8080 proxgen-serve      # the shipped resnet20-sparse
#   docker run -p 8080:8080 -v "$PWD/runs/resnet20-proxgen-l12-s1:/models:ro" \
#       proxgen-serve -model /models/model.safetensors
#
# The binary embeds the shipped models (nn/pretrained): with no flags the
# image serves the default one, -model NAME another. Flags after the image
# name (a mounted -model FILE, -model-dir /models) replace the empty CMD.
# scripts/check-dockerfile (run by .ci/run) checks that every path copied
# here exists and runs the build command below outside a container.

FROM golang:1.24-bookworm AS build
WORKDIR /src
# The module has no dependencies (no go.sum): copying go.mod first only
# keeps the layer cache warm across source changes.
COPY go.mod ./
COPY autograd ./autograd
COPY datasets ./datasets
COPY internal ./internal
COPY nn ./nn
COPY optim ./optim
COPY cmd/internal ./cmd/internal
COPY cmd/serve ./cmd/serve
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/serve ./cmd/serve

# scratch: nothing but the binary, which needs no libc, no CA certificates
# (it makes no outbound TLS connection), no shell and no /etc/passwd (the
# user is numeric). The probes are HTTP requests from the kubelet, so the
# image needs no curl; docker's HEALTHCHECK would need one, so there is
# none. scripts/check-dockerfile builds this stage with podman or docker
# where one runs (13-14 MB).
FROM scratch
COPY --from=build /out/serve /serve
USER 65532:65532
EXPOSE 8080
# Liveness: GET /v2/health/live. Readiness: GET /v2/health/ready (the Open
# Inference Protocol's health endpoints; /healthz answers too).
ENTRYPOINT ["/serve", "-addr", ":8080"]
CMD []
