# One image for the worker and the HTTP service (event ingress, /v1/tools endpoints).
FROM python:3.11-slim
WORKDIR /app
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY pyproject.toml README.md ./
COPY agent_tools ./agent_tools
COPY worker.py ./
RUN pip install --no-cache-dir ".[postgres]"
CMD ["python", "worker.py"]
