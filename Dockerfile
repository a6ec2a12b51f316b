# syntax=docker/dockerfile:1
# The kubesched image: one entrypoint, `kubesched`, for every part (scheduler, annotator, operator,
# installer, ...): `docker run kubesched:TAG scheduler --config ...`.
#
# The base is pinned by tag and digest (python:3.11-slim-bookworm, linux/amd64+arm64 index). To move to
# a newer base: `docker buildx imagetools inspect python:3.11-slim-bookworm` and replace both FROM lines.
ARG BASE=python:3.11-slim-bookworm@sha256:2e32f7d302adc1c37428355c1e646897c0c53f4fd60b6a551245fb90ee129f91

# Wheels for kubesched and exactly the runtime dependencies pinned in requirements.lock (the lock also
# pins the test tools; `-c` takes only the versions of what kubesched needs).
FROM ${BASE} AS wheels
WORKDIR /src
COPY pyproject.toml requirements.lock README.md ./
COPY kubesched ./kubesched
RUN pip wheel --no-cache-dir --wheel-dir /wheels --constraint requirements.lock .

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index /wheels/*.whl \
    && kubesched --help > /dev/null
# A numeric user and group (65532, "nonroot" by convention), so runAsNonRoot can verify it.
USER 65532:65532
WORKDIR /tmp
EXPOSE 10259
ENTRYPOINT ["kubesched"]
CMD ["--help"]
