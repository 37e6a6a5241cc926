"""``batch --pushgateway`` through a real Pushgateway: the pushed importances are exactly the CSV's;
a push replaces its group and keeps other groups; a Pushgateway that is down fails the run after the
records are written. ``--metrics-textfile`` writes the same numbers atomically."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import HGB, SAMPLE, free_port, ipfi

# the tests run the command as a user does (a process); those that push start a real Pushgateway (slow)
BATCH_ROWS = 1000
BATCH = ["batch", "-m", HGB, "-t", "class", "--repeats", "2", "--seed", "0", "--threads", "1", "-q"]


@pytest.fixture(scope="module")
def rows_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("push") / "rows.csv"
    path.write_text("\n".join((SAMPLE / "agrawal_static.csv").read_text().splitlines()[:BATCH_ROWS + 1]) + "\n")
    return str(path)


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_batch_pushes_its_importances_to_a_real_pushgateway(pushgateway, rows_file, tmp_path):
    textfile = tmp_path / "ipfi.prom"
    result = ipfi(*BATCH, rows_file, "--pushgateway", pushgateway, "--push-job", "nightly", "--push-label", "model=hgb",
                  "--metrics-label", "team=risk", "--metrics-textfile", str(textfile))
    assert result.returncode == 0, result.stderr
    expected = {row["feature"]: float(row["importance"]) for row in csv.DictReader(io.StringIO(result.stdout))}
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as response:
        exposed = response.read().decode()
    pushed = samples(exposed, "ipfi_feature_importance")
    assert {dict(k)["feature"]: v for k, v in pushed.items()} == expected  # exactly (repr floats both ways)
    assert {(dict(k)["job"], dict(k)["model"], dict(k)["team"]) for k in pushed} == {("nightly", "hgb", "risk")}
    assert len(samples(exposed, "ipfi_last_success_timestamp_seconds")) == 1
    assert list(samples(exposed, "ipfi_rows_read_total").values()) == [float(BATCH_ROWS)]
    written = samples(textfile.read_text(), "ipfi_feature_importance")
    assert {dict(k)["feature"]: v for k, v in written.items()} == expected
    assert not list(tmp_path.glob(".ipfi-*"))  # no temporary file left behind

    # another group (a push under another model label) leaves the first one in place
    other = ipfi(*BATCH, rows_file, "--features", "salary,age", "--pushgateway", pushgateway, "--push-job", "nightly",
                 "--push-label", "model=other")
    assert other.returncode == 0, other.stderr
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as response:
        both = samples(response.read().decode(), "ipfi_feature_importance")
    assert {dict(k)["model"] for k in both} == {"hgb", "other"}
    assert {dict(k)["feature"]: v for k, v in both.items() if dict(k)["model"] == "hgb"} == expected


@pytest.mark.process
def test_a_pushgateway_that_is_down_fails_the_run_after_the_records_are_written(rows_file):
    url = f"http://127.0.0.1:{free_port()}"
    result = ipfi(*BATCH, rows_file, "--features", "salary", "--pushgateway", url)
    assert result.returncode == 1
    assert result.stdout.startswith("feature,importance")  # the records are written first
    assert f"--pushgateway {url}: the push failed" in result.stderr


@pytest.mark.process
def test_a_failed_pushs_reason_is_one_clean_line_without_secrets(rows_file):
    """The reason is the operating system's words without the errno (it printed "[Errno 111]
    Connection refused"), and the URL's password, path and query are never shown."""
    port = free_port()  # nothing listens there
    url = f"http://admin:s3cretpw@127.0.0.1:{port}/prefix/tok3n?token=abcdef"
    result = ipfi(*BATCH, rows_file, "--features", "salary", "--pushgateway", url)
    assert result.returncode == 1
    assert result.stderr.splitlines()[-1] == (f"ipfi: error: --pushgateway http://admin:***@127.0.0.1:{port}/***: "
                                              "the push failed (connection refused)")
    for secret in ("s3cretpw", "tok3n", "abcdef", "prefix", "Errno"):
        assert secret not in result.stderr


@pytest.mark.parametrize("url", ["http://admin:s3cretpw@127.0.0.1:{port}/tok3n",
                                 "http://admin:s3cretpw@nosuchhost.invalid:{port}/tok3n"])
def test_push_says_why_it_failed_in_the_systems_words_without_the_errno(url):
    from ipfi_cli.errors import OutputError
    from ipfi_cli.io.prometheus import MetricSet, push

    with pytest.raises(OutputError) as error:
        push(url.format(port=free_port()), MetricSet({}), "ipfi", {}, timeout=5)
    message = str(error.value)
    reason = message.split("the push failed (", 1)[1]
    assert reason[:1].islower() and reason.endswith(")") and "\n" not in message, message
    assert "Errno" not in message and "[" not in reason and "s3cretpw" not in message and "tok3n" not in message


@pytest.mark.process
def test_bad_label_options_are_usage_errors(rows_file):
    result = ipfi(*BATCH, rows_file, "--metrics-textfile", "x.prom", "--metrics-label", "feature=x")
    assert result.returncode == 2 and "ipfi sets itself" in result.stderr
    result = ipfi(*BATCH, rows_file, "--metrics-label", "model=x")
    assert result.returncode == 2 and "needs --metrics-port" in result.stderr


def test_a_finite_explain_pushes_its_last_record(pushgateway, tmp_path):
    data = tmp_path / "rows.csv"
    data.write_text("\n".join((SAMPLE / "agrawal_static.csv").read_text().splitlines()[:301]) + "\n")
    meta = tmp_path / "meta.json"
    result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "--repeats", "2", "--no-live", "-q",
                  "--pushgateway", pushgateway, "--push-label", "stream=test", "--meta", str(meta))
    assert result.returncode == 0, result.stderr
    assert json.loads(meta.read_text())["pushed"] is True
    header, *records = result.stdout.splitlines()
    last = dict(zip(header.split(",")[1:], map(float, records[-1].split(",")[1:])))
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as response:
        exposed = response.read().decode()
    pushed = samples(exposed, "ipfi_feature_importance")
    assert {dict(k)["feature"]: v for k, v in pushed.items()} == last
    assert list(samples(exposed, "ipfi_rows_explained_total").values()) == [299.0]
    assert {dict(k)["job"] for k in pushed} == {"ipfi"}


#: Prometheus's documented example: user admin, password "test" (bcrypt)
WEB_CONFIG = "basic_auth_users:\n  admin: $2b$12$hNf2lSsxfm0.i4a.1kVpSOVyBCfIB51VRjgBUyv6kdnyTlgWj81Ay\n"


@pytest.mark.slow
def test_a_pushgateway_behind_basic_auth_takes_the_urls_user_and_password(rows_file, tmp_path):
    """``--pushgateway http://user:password@host`` used to fail with "Name or service not known": the
    user and password went into the host name. Now they are sent as basic authentication (the
    Pushgateway's --web.config.file) and never printed."""
    import base64

    from .conftest import Server, need, wait_for

    binary = need("prometheus-pushgateway")
    port = free_port()
    (tmp_path / "web.yml").write_text(WEB_CONFIG)
    server = Server([binary, f"--web.listen-address=127.0.0.1:{port}", f"--web.config.file={tmp_path / 'web.yml'}",
                     f"--persistence.file={tmp_path / 'pg.data'}"], tmp_path / "pushgateway.log", tmp_path)
    url = f"http://127.0.0.1:{port}"
    authorised = urllib.request.Request(url + "/metrics",
                                        headers={"Authorization": "Basic " + base64.b64encode(b"admin:test").decode()})
    try:
        wait_for(lambda: urllib.request.urlopen(authorised, timeout=2).status == 200, 30,
                 "the pushgateway to be ready", server.log)
        result = ipfi(*BATCH, rows_file, "--pushgateway", f"http://admin:test@127.0.0.1:{port}/",
                      "--push-job", "guarded")
        assert result.returncode == 0, result.stderr
        with urllib.request.urlopen(authorised, timeout=5) as response:
            assert 'job="guarded"' in response.read().decode()
        refused = ipfi(*BATCH, rows_file, "--pushgateway", f"http://admin:wrong@127.0.0.1:{port}/",
                       "--push-job", "guarded")
        assert refused.returncode == 1 and "the push failed (HTTP 401 Unauthorized)" in refused.stderr
        assert "wrong" not in refused.stderr and "admin:***@" in refused.stderr
    finally:
        server.stop()


def explain_into_a_pushgateway_that_is_down(tmp_path, rows: list[str], *options: str
                                            ) -> tuple[subprocess.CompletedProcess[str], list[str], dict]:
    data, meta = tmp_path / "rows.csv", tmp_path / "meta.json"
    data.write_text("\n".join(rows) + "\n")
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "7", "--repeats", "3", "--no-live",
                  "--pushgateway", url, "--meta", str(meta), *options)
    assert f"--pushgateway {url}: the push failed" in result.stderr
    return result, result.stdout.splitlines(), json.loads(meta.read_text())


@pytest.mark.process
def test_a_failed_push_at_the_end_still_writes_the_meta_file(tmp_path):
    """The stream ended and every record is written: --meta says so, and that the push failed (it was
    not written at all: the push's error skipped it)."""
    rows = (SAMPLE / "agrawal_static.csv").read_text().splitlines()[:301]
    result, (header, *records), meta = explain_into_a_pushgateway_that_is_down(tmp_path, rows, "-q")
    assert result.returncode == 1
    assert len(records) == 300 and meta["rows"]["records_written"] == 300  # the first row's is empty
    assert meta["rows"]["explained"] == 299
    last = dict(zip(header.split(",")[1:], map(float, records[-1].split(",")[1:])))
    assert meta["final"]["importances"] == last
    assert meta["status"] == "ok" and meta["pushed"] is False and "the push failed" in meta["error"]


@pytest.mark.process
def test_a_change_found_exits_3_though_the_push_failed(tmp_path):
    """--fail-on-change: a change was detected, so the exit code is 3 even though the push at the end
    failed (it was 1: a script waiting for 3 missed the change); an error line says the push failed."""
    header, *drift = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()
    rows = [header, *drift[9000:10600]]  # the concept switches at row 10,000 of the file
    result, _, meta = explain_into_a_pushgateway_that_is_down(tmp_path, rows, "--detect", "--alpha", "0.01",
                                                             "--fail-on-change")
    assert meta["changes"], "the drift is detected"
    assert result.returncode == 3, result.stderr
    assert "a change was detected" in result.stderr.splitlines()[-1]
    assert meta["pushed"] is False and "the push failed" in meta["error"]


@pytest.mark.process
def test_a_query_string_stays_the_query_and_is_never_shown(rows_file, receiver_factory):
    """``--pushgateway http://host/prefix?token=...``: the API path goes after the URL's path and the
    query stays the query (the request went to ``/prefix?token=.../metrics/job/ipfi``, the path inside
    the query); a failure's message shows neither the path nor the query (it printed the token)."""
    receiver = receiver_factory(path="/prefix")
    result = ipfi(*BATCH, rows_file, "--features", "salary", "--pushgateway", receiver.url + "?token=s3cret",
                  "--push-label", "model=hgb")
    assert result.returncode == 0, result.stderr
    assert receiver.paths == ["PUT /prefix/metrics/job/ipfi/model/hgb?token=s3cret"]
    assert b"ipfi_feature_importance" in receiver.bodies[0]

    refusing = receiver_factory(path="/prefix", status=403)
    result = ipfi(*BATCH, rows_file, "--features", "salary", "--pushgateway", refusing.url + "?token=s3cret")
    assert result.returncode == 1
    assert "the push failed (HTTP 403 Forbidden)" in result.stderr and "s3cret" not in result.stderr
    assert "/prefix" not in result.stderr  # the path is shown as *** too, as --webhook's and --meta's are


def test_a_push_replaces_its_group_so_no_earlier_runs_series_lingers(pushgateway, rows_file, tmp_path):
    """A push replaces its group (PUT, as prometheus_client's push_to_gateway does): after an explain
    run, a batch run pushed to the same group leaves no explain-only series (with push-add, POST, the
    bounds, the rows explained and the run's own nDCG stayed beside the new run's numbers)."""
    data = tmp_path / "rows.csv"
    data.write_text("\n".join((SAMPLE / "agrawal_static.csv").read_text().splitlines()[:201]) + "\n")
    group = ["--pushgateway", pushgateway, "--push-job", "nightly", "--push-label", "model=hgb"]
    first = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "--no-live", "-q", *group)
    assert first.returncode == 0, first.stderr
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as response:
        assert samples(response.read().decode(), "ipfi_feature_importance_bound")  # explain's, pushed
    second = ipfi(*BATCH, rows_file, *group)
    assert second.returncode == 0, second.stderr
    with urllib.request.urlopen(pushgateway + "/metrics", timeout=5) as response:
        exposed = response.read().decode()
    assert samples(exposed, "ipfi_feature_importance_bound") == {}
    assert samples(exposed, "ipfi_rows_explained_total") == {}
    assert list(samples(exposed, "ipfi_rows_read_total").values()) == [float(BATCH_ROWS)]  # batch's


@pytest.mark.process
def test_one_label_with_two_values_is_a_usage_error(rows_file):
    """--push-label model=x with --metrics-label model=y was taken silently: every pushed series would
    carry model twice. Now a usage error; the same value in both is fine."""
    result = ipfi(*BATCH, rows_file, "--metrics-textfile", "x.prom", "--pushgateway", "http://127.0.0.1:9/",
                  "--push-label", "model=x", "--metrics-label", "model=y")
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "--push-label" in result.stderr and "'model'" in result.stderr
