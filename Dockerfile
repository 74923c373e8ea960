# gpuctl for CI jobs (docs/releasing.md): the release binary on distroless's `cc` image (glibc,
# libgcc_s for unwinding, CA certificates, tzdata, no shell, non-root). The binary is the one the
# release pipeline built on ubuntu-22.04 (glibc 2.35 floor), so debian12's glibc 2.36 runs it.
# Built by .github/workflows/release.yml with `image/<arch>/gpuctl` staged beside this file:
#   docker buildx build --platform linux/amd64,linux/arm64 -f Dockerfile .
# Not built here: this machine has a docker client but no daemon and no registry access.
FROM gcr.io/distroless/cc-debian12:nonroot
ARG TARGETARCH
COPY --chmod=0755 image/${TARGETARCH}/gpuctl /usr/local/bin/gpuctl
COPY LICENSE /usr/share/doc/gpuctl/LICENSE
ENV NO_COLOR=1
USER nonroot
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/gpuctl"]
CMD ["--help"]
