"""Files with the mess real exports have: each case once gave a wrong answer with exit 0, an
unreadable line or a message that did not say what the file is. Every case runs through the real
command, on data the test writes."""

from __future__ import annotations

from .conftest import SAMPLE, head_lines

BASE = ["--seed", "3", "-M", "3", "--no-live"]


def one_line(stderr: str, prefix: str = "ipfi: error: ") -> str:
    lines = [line for line in stderr.strip().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1, stderr
    return lines[0]


# -- a junk field in a message ------------------------------------------------------------------
def test_a_huge_junk_field_is_quoted_cut_with_its_length(run, hgb, tmp_path):
    lines = head_lines(SAMPLE / "agrawal_static.csv", 30).splitlines()
    fields = lines[4].split(",")
    fields[0] = "J" * 100_000
    lines[4] = ",".join(fields)
    path = tmp_path / "junk.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run("explain", path, "-m", hgb, "-t", "class", *BASE)
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert len(line) < 400, len(line)
    assert "row 4 (line 5), column 'salary'" in line
    assert "'" + "J" * 80 + "…' (100,000 characters)" in line
    assert len(result.stdout.splitlines()) == 4  # the header and rows 1-3 (nothing computed is lost)


def test_a_huge_column_name_leaves_a_line_of_bounded_length(run, hgb, tmp_path):
    lines = head_lines(SAMPLE / "agrawal_static.csv", 30).splitlines()
    lines[0] = lines[0].replace("car", "c" * 50_000)
    path = tmp_path / "wide.csv"
    path.write_text("\n".join(lines) + "\n")
    result = run("explain", path, "-m", hgb, "-t", "label", *BASE)  # the message lists the columns
    assert result.exit_code == 1
    line = one_line(result.stderr)
    assert len(line) < 2100 and "characters cut" in line, line[:300]
    assert "no column 'label' (the --target)" in line and line.endswith("loan, class")
