# jobqueue's image: `jobqueue serve`, `api`, `worker` or any other command.
#   docker build -t jobqueue .
#   docker run --rm -e DATABASE_URL=postgresql://... jobqueue worker --app myproject.tasks:jq
# Your tasks: build an image FROM this one that adds your code (and its dependencies)
# and points JOBQUEUE_APP at your JobQueue.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    # Logs as one JSON object per line, for a collector.
    JOBQUEUE_LOG_FORMAT=json

WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . \
    && useradd --system --uid 10001 --no-create-home jobqueue
USER jobqueue

EXPOSE 5001
ENTRYPOINT ["jobqueue"]
CMD ["serve", "--host", "0.0.0.0"]
