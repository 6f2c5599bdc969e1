# One image for the worker and the HTTP service (event ingress, /v1/tools endpoints).
FROM python:3.11-slim
# bubblewrap: exec_python's sandbox (docs/codai-extras.md). Without it the worker does not offer the tool.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY agent_tools ./agent_tools
COPY worker.py ./
RUN pip install --no-cache-dir ".[postgres]"
CMD ["python", "worker.py"]
