# The sweep image for Kubernetes (docs/sweeps.md): cmd/sweep as one static
# binary on a distroless base; it runs cifar and ptb points in-process.
#
#   docker build -t REGISTRY/proxgen-sweep:TAG .
FROM golang:1.24 AS build
WORKDIR /src
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags=-s -o /out/sweep ./cmd/sweep

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/sweep /sweep-bin
ENTRYPOINT ["/sweep-bin"]
