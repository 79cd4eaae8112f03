"""The `talkline` command: serve (and, as they land, engine, bench, train, eval, export)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

app = typer.Typer(help="Talkline: a self-hostable real-time voice agent server.", no_args_is_help=True)


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")


@app.command()
def serve(
    host: Annotated[str, typer.Option(envvar="TALKLINE_HOST")] = "127.0.0.1",
    port: Annotated[int, typer.Option(envvar="TALKLINE_PORT")] = 8000,
    profiles: Annotated[Path | None, typer.Option(envvar="TALKLINE_PROFILES", help="folder of profile YAML files")] = None,
    db: Annotated[str, typer.Option(envvar="TALKLINE_DB", help="SQLAlchemy database URL")] = "sqlite:///talkline.db",
    llm: Annotated[str, typer.Option(envvar="TALKLINE_LLM", help="LLM backend: embedded")] = "embedded",
    log_level: Annotated[str, typer.Option(envvar="TALKLINE_LOG_LEVEL")] = "info",
) -> None:
    """Run the voice server (embedded models) on HOST:PORT."""
    import uvicorn

    from server.app import create_app
    from server.settings import DEFAULT_PROFILES, Settings

    _logging(log_level)
    settings = Settings(host=host, port=port, profiles_dir=profiles or DEFAULT_PROFILES, db_url=db, llm=llm)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=log_level, ws_max_size=1 << 20)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
