# Build wheels in one stage; the final image has the wheels installed and no build tools.
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY webhook ./webhook
COPY certs ./certs
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    GPUPORT_CLOUDMAP_DIR=/app/cloudmaps \
    GPUPORT_CERT_DIR=/etc/gpuport/tls
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir --no-compile /wheels/*.whl && rm -rf /wheels \
    && groupadd --gid 65532 gpuport && useradd --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin gpuport
# Default cloud maps; the Deployment mounts the gpuport-cloudmaps ConfigMap over GPUPORT_CLOUDMAP_DIR.
COPY cloudmaps /app/cloudmaps
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["gpuport"]
CMD ["serve"]
