# Build wheels in one stage; the final image has the wheels installed and no build tools.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY certs ./certs
# webhook/shipped_cloudmaps links to cloudmaps/: the wheel carries the maps and the GPU catalogue.
COPY cloudmaps ./cloudmaps
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUPORT_CERT_DIR=/etc/gpuport/tls
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl && rm -rf /wheels \
    && groupadd --gid 65532 gpuport && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin gpuport
# The shipped maps are inside the package; the Deployment mounts the gpuport-cloudmaps ConfigMap and
# points GPUPORT_CLOUDMAP_DIR at it.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpuport"]
CMD ["serve"]
