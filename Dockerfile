# syntax=docker/dockerfile:1
#
# virtwork container image: a Rust build stage and a UBI 9 minimal runtime.
#
#   podman build \
#     --build-arg VIRTWORK_GIT_COMMIT="$(git rev-parse HEAD)" \
#     --build-arg VIRTWORK_BUILD_DATE="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
#     -t quay.io/opdev/virtwork:dev .
#
# The build stage runs build/build-release.sh, the same script a local release build uses
# (tested in tests/packaging.rs). .git is not in the build context, so without the two
# build args `virtwork version` reports "(unknown)". Bookworm's glibc is 2.36 but the binary only needs symbols up
# to GLIBC_2.34, which UBI 9 ships; tests/packaging.rs checks that bound on every build.

ARG RUST_IMAGE=docker.io/library/rust:1.95-bookworm
ARG RUNTIME_IMAGE=registry.access.redhat.com/ubi9/ubi-minimal:latest

FROM ${RUST_IMAGE} AS build
ARG VIRTWORK_GIT_COMMIT=
ARG VIRTWORK_BUILD_DATE=
WORKDIR /src
COPY . .
# Cache mounts keep the crate registry and target dir between builds; the script copies the
# binary out of the (unpersisted) target cache into /out.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    VIRTWORK_GIT_COMMIT="${VIRTWORK_GIT_COMMIT}" \
    VIRTWORK_BUILD_DATE="${VIRTWORK_BUILD_DATE}" \
    ./build/build-release.sh --out /out \
 && /out/virtwork version

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG VIRTWORK_GIT_COMMIT=
ARG VIRTWORK_BUILD_DATE=

LABEL name="virtwork" \
      summary="Create VMs on OpenShift Virtualization with continuous workloads" \
      description="virtwork creates KubeVirt virtual machines running continuous CPU, memory, disk, database, network and chaos workloads under systemd, to produce realistic metrics." \
      io.k8s.display-name="virtwork" \
      io.k8s.description="Creates OpenShift Virtualization / KubeVirt VMs running continuous stress workloads injected through cloud-init, records each run in a SQLite audit database and cleans up by label." \
      io.openshift.tags="virtwork,kubevirt,openshift,virtualization,workload-generator" \
      org.opencontainers.image.title="virtwork" \
      org.opencontainers.image.description="Create VMs on OpenShift Virtualization / KubeVirt with continuous, realistic workloads" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${VIRTWORK_GIT_COMMIT}" \
      org.opencontainers.image.created="${VIRTWORK_BUILD_DATE}" \
      org.opencontainers.image.source="https://github.com/opdev/virtwork" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="virtwork"

# /data holds the audit database (a PVC in the cluster). Group 0 with g=u lets OpenShift's
# arbitrary UIDs (always in group root) write it as well as UID 1001.
RUN mkdir -p /data \
 && chown 1001:0 /data \
 && chmod 0775 /data \
 && chmod g=u /data

COPY --from=build /out/virtwork /usr/local/bin/virtwork
COPY --chmod=0755 entrypoint.sh /usr/local/bin/entrypoint.sh

USER 1001
WORKDIR /data
# HOME=/data: the default catalog dir (~/.virtwork/catalog) must resolve for an arbitrary UID
# without a passwd entry.
ENV HOME=/data \
    VIRTWORK_AUDIT_DB=/data/virtwork.db \
    VIRTWORK_BIN=/usr/local/bin/virtwork

ENTRYPOINT ["/usr/local/bin/entrypoint.sh"]
