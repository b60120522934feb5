"""FileIO.glob: the source patterns a load names (S12.1: by URI, through the file-IO layer)."""

from __future__ import annotations

from lakelog.store import Location


def test_glob_matches_within_a_name_and_across_folders_with_double_star(tmp_path):
    root = Location.of(tmp_path)
    for name in ("a/2026-01-01.parquet", "a/2026-01-02.csv", "a/b/2026-01-03.parquet", "a/b/c/x.parquet", "z.parquet"):
        root.io.make_dirs((root / name).uri.rsplit("/", 1)[0])
        root.io.write((root / name).uri, b"x")

    def found(pattern: str) -> list[str]:
        return [uri[len(root.uri) + 1 :] for uri in root.io.glob((root / pattern).uri)]

    assert found("a/*.parquet") == ["a/2026-01-01.parquet"]
    assert found("a/2026-01-0[12].*") == ["a/2026-01-01.parquet", "a/2026-01-02.csv"]
    assert found("a/**/*.parquet") == ["a/2026-01-01.parquet", "a/b/2026-01-03.parquet", "a/b/c/x.parquet"]
    assert found("a/*/2026-??-??.parquet") == ["a/b/2026-01-03.parquet"]
    assert found("a/2026-01-01.parquet") == ["a/2026-01-01.parquet"]
    assert found("a/b") == []  # a folder is not a file
    assert found("nowhere/*.parquet") == []
