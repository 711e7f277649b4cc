"""The temporary Prefect server's database template (paperdag.engine.prefect_server)."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from paperdag.engine import prefect_server


def test_only_a_database_at_the_templates_migration_skips_migrating_and_registering(tmp_path: Path) -> None:
    """The template is what a first server start leaves: migrated, Prefect's block types registered. A copy of it
    needs neither step (its server is told to skip both); a database at another migration, one without the block
    types, or a file that is no database is left to the server to migrate and register."""
    template = prefect_server.build_template()
    with closing(sqlite3.connect(template)) as c:
        assert c.execute("SELECT count(*) FROM alembic_version").fetchone()[0] == 1
        assert c.execute("SELECT count(*) FROM block_type").fetchone()[0] > 0

    def copy(name: str, sql: str | None = None) -> Path:
        db = tmp_path / name
        shutil.copyfile(template, db)
        if sql:
            with closing(sqlite3.connect(db)) as c:
                c.execute(sql)
                c.commit()
        return db

    assert prefect_server._settled(copy("same.db"), template)
    assert not prefect_server._settled(copy("older.db", "UPDATE alembic_version SET version_num = 'aaaaaaaaaaaa'"),
                                       template)
    assert not prefect_server._settled(copy("no-blocks.db", "DELETE FROM block_type"), template)
    (tmp_path / "junk.db").write_text("not a database")
    assert not prefect_server._settled(tmp_path / "junk.db", template)
