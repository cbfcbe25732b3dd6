# Aphrodite Engine 0.5.x, built from its git tag: the last release line that serves EXL2 models
# (0.6.0 removed EXL2; the published alpindale/aphrodite-openai images start at 0.6.0).
# docker-compose.yml builds it for the `aphrodite` service (profile `aphrodite`).
# Building compiles the CUDA kernels: expect 20-60 minutes; set MAX_JOBS to the host's cores.
FROM nvidia/cuda:12.1.1-devel-ubuntu22.04

ARG APHRODITE_REF=v0.5.3
ARG MAX_JOBS=8
ARG TORCH_CUDA_ARCH_LIST="8.0 8.6 8.9 9.0+PTX"

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_NO_CACHE_DIR=1 \
    CUDA_HOME=/usr/local/cuda \
    MAX_JOBS=${MAX_JOBS} \
    TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST} \
    HF_HOME=/root/.cache/huggingface

RUN apt-get update \
    && apt-get install -y --no-install-recommends git python3 python3-pip python3-dev g++ make \
    && rm -rf /var/lib/apt/lists/* \
    && ln -sf /usr/bin/python3 /usr/bin/python

RUN git clone --depth 1 --branch "${APHRODITE_REF}" https://github.com/PygmalionAI/aphrodite-engine.git /opt/aphrodite-engine
WORKDIR /opt/aphrodite-engine
RUN python3 -m pip install --upgrade pip \
    && python3 -m pip install -e . \
    && python3 -c "import aphrodite; print('aphrodite', aphrodite.__version__)"

EXPOSE 2242
# The OpenAI-compatible server; docker-compose.yml appends --model, --quantization exl2, ...
ENTRYPOINT ["python3", "-m", "aphrodite.endpoints.openai.api_server"]
