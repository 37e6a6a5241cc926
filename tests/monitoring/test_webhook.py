"""``--webhook``: change events posted from a bounded background queue to a real receiver on
127.0.0.1 that is slow, fails or is down. The stream's traces are the same bytes as without the
webhook, posts are retried and counted, and no event is lost while the receiver is up."""

from __future__ import annotations

import json

import pytest

from ipfi_cli.io.webhook import WebhookSender, shown_url

from .conftest import HGB, free_port, ipfi, sample_lines


# -- the sender ---------------------------------------------------------------------------------------------
def test_a_failing_receiver_gets_every_post_after_retries(receiver_factory):
    receiver = receiver_factory(fail_first=2)
    sender = WebhookSender(receiver.url, retries=3, backoff=0.01)
    bodies = [json.dumps({"n": i}).encode() for i in range(5)]
    for i, body in enumerate(bodies):
        assert sender.send(body, dedup=i)
    stats = sender.close(wait=30)
    assert receiver.bodies == bodies  # all of them, in order
    assert (stats.queued, stats.sent, stats.retries, stats.failed, stats.dropped) == (5, 5, 10, 0, 0)


def test_sending_never_waits_for_a_hanging_receiver_and_a_full_queue_drops(receiver_factory):
    receiver = receiver_factory()
    receiver.gate.clear()  # every request hangs until the gate opens
    sender = WebhookSender(receiver.url, queue_size=2, retries=0, timeout=30)
    # two posts wait in the queue (and one more if the thread took the first already), the rest find it full;
    # every send returns while the receiver still hangs: the stream is never held back
    accepted = [sender.send(f"{i}".encode()) for i in range(10)]
    assert 2 <= sum(accepted) <= 3 and accepted[:2] == [True, True]
    assert receiver.bodies == []
    receiver.gate.set()
    stats = sender.close(wait=30)
    assert stats.sent == sum(accepted) and stats.dropped == 10 - sum(accepted)
    assert receiver.bodies == [f"{i}".encode() for i, ok in enumerate(accepted) if ok]


def test_a_receiver_that_is_down_counts_failures_and_retries():
    sender = WebhookSender(f"http://127.0.0.1:{free_port()}/", retries=2, backoff=0.01, timeout=2)
    for i in range(3):
        sender.send(f"{i}".encode())
    stats = sender.close(wait=30)
    assert (stats.sent, stats.failed, stats.retries) == (0, 3, 6)
    assert "0 of 3 post(s) delivered" in stats.summary("http://x/")


def test_the_end_of_run_line_says_why_the_last_attempt_failed(receiver_factory):
    """A receiver answering 500 and a closed port gave the same line; now each says its reason, the
    server's reason phrase escaped, and a token in the URL's path is never shown."""
    failing = receiver_factory(status=500)
    closed = f"http://127.0.0.1:{free_port()}/hook"
    lines = {}
    for name, url in (("500", failing.url), ("closed", closed)):
        sender = WebhookSender(url, retries=1, backoff=0.01, timeout=5)
        for i in range(2):
            sender.send(f"{i}".encode())
        stats = sender.close(wait=30)
        assert (stats.sent, stats.failed, stats.retries) == (0, 2, 2)
        lines[name] = stats.summary("http://x/")
    assert lines["500"].endswith("; the last failed attempt: HTTP 500 Internal Server Error"), lines["500"]
    assert lines["closed"].endswith("; the last failed attempt: connection refused"), lines["closed"]

    secret = "/services/T0123/B0456/s3cretT0ken"
    hostile = receiver_factory(status=404, reason=f"Not Found \x1b]52;c;aGk=\x07 {secret}", path=secret)
    sender = WebhookSender(hostile.url, retries=3, backoff=0.01)
    sender.send(b"x")
    stats = sender.close(wait=30)
    notifier_line = stats.summary(shown_url(hostile.url))
    assert (stats.failed, stats.retries) == (1, 0)  # a refusal: not retried
    assert "s3cretT0ken" not in notifier_line and "\x1b" not in notifier_line and "\x07" not in notifier_line
    assert notifier_line.startswith(f"--webhook http://127.0.0.1:{hostile.url.split(':')[2].split('/')[0]}/***: ")
    assert notifier_line.endswith("the last failed attempt: HTTP 404 Not Found \\x1b]52;c;aGk=\\x07 /***")


def test_a_refusal_is_not_retried_and_the_unsent_are_dropped_at_the_deadline(receiver_factory):
    refusing = receiver_factory(status=400)
    sender = WebhookSender(refusing.url, retries=5, backoff=0.01)
    sender.send(b"x")
    stats = sender.close(wait=30)
    assert (stats.sent, stats.failed, stats.retries) == (0, 1, 0)

    hanging = receiver_factory()
    hanging.gate.clear()
    sender = WebhookSender(hanging.url, retries=0, timeout=1)
    for i in range(4):
        sender.send(f"{i}".encode())
    stats = sender.close(wait=0.2)  # the first post times out; the other three are never attempted
    assert stats.dropped == 3 and stats.sent == 0


def test_duplicates_and_the_cooldown_are_not_posted_but_counted(receiver_factory):
    receiver = receiver_factory()
    sender = WebhookSender(receiver.url, cooldown=3600)
    assert sender.send(b"a", dedup="a", cooldown=("importance", "age", "up"))
    assert not sender.send(b"a", dedup="a", cooldown=("importance", "age", "up"))  # the same event
    assert not sender.send(b"b", dedup="b", cooldown=("importance", "age", "up"))  # in the cooldown
    assert sender.send(b"c", dedup="c", cooldown=("importance", "age", "down"))  # another direction
    stats = sender.close(wait=30)
    assert receiver.bodies == [b"a", b"c"]
    assert (stats.duplicates, stats.suppressed) == (1, 1)


def test_a_user_and_password_in_the_url_are_sent_as_basic_authentication(receiver_factory):
    """``http://user:password@host/hook`` failed every post (urllib took the user and password for
    part of the host); now they go in an Authorization header, %-decoded, as --pushgateway sends them."""
    import base64

    expected = "Basic " + base64.b64encode(b"bot:s@cr:et").decode()  # RFC 7617, by hand
    receiver = receiver_factory(authorization=expected)
    url = receiver.url.replace("http://", "http://bot:s%40cr%3Aet@")
    sender = WebhookSender(url, retries=0)
    sender.send(b"x")
    stats = sender.close(wait=30)
    assert (stats.sent, stats.failed) == (1, 0), stats.last_failure
    assert receiver.bodies == [b"x"] and receiver.authorizations == [expected]


def test_a_malformed_url_is_refused_by_the_sender_not_its_thread():
    """``http://[::1/hook`` raised ValueError in the sender's thread (a traceback, the thread gone,
    every event lost); the sender refuses it as it is made, without quoting the URL."""
    with pytest.raises(ValueError, match=r"^not a valid URL") as refused:
        WebhookSender("http://u:pa55@[::1/hook", retries=0)
    assert "pa55" not in str(refused.value)


@pytest.mark.process  # the command in a process
@pytest.mark.parametrize("option, url", [
    ("--webhook", "http://[::1/hook"),
    ("--webhook", "http://bot:s3cret@127.0.0.1:99999/hook"),
    ("--pushgateway", "http://bot:s3cret@[::1"),
    ("--pushgateway", "http://127.0.0.1:99999/?token=s3cret"),
])
def test_a_bad_url_is_a_usage_error_before_the_first_row(option, url, drift_stream):
    """A malformed webhook URL killed the sender's thread with a traceback and exit 0; a malformed
    Pushgateway URL failed after the whole run. Now: one line, exit 2, no record, no secret."""
    result = ipfi("explain", str(drift_stream), *EXPLAIN, option, url)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""  # before the first row: not even the traces' header
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("ipfi: usage error: ")
    assert option in result.stderr and "s3cret" not in result.stderr and "Traceback" not in result.stderr


# -- through the command ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def drift_stream(tmp_path_factory):
    """1,100 rows around the abrupt drift of agrawal_drift.csv (at row 601 of this slice)."""
    header, *rows = sample_lines("agrawal_drift.csv")
    path = tmp_path_factory.mktemp("webhook") / "drift.csv"
    path.write_text("\n".join([header, *rows[9400:10500]]) + "\n")
    return path


EXPLAIN = ["-m", HGB, "-t", "class", "--seed", "3", "--repeats", "2", "--alpha", "0.01", "--no-live"]


@pytest.fixture(scope="module")
def plain_run(drift_stream, tmp_path_factory):
    events = tmp_path_factory.mktemp("plain") / "events.jsonl"
    result = ipfi("explain", str(drift_stream), *EXPLAIN, "--events", str(events))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    assert len(lines) >= 2, "the drift should give change events"
    return result.stdout, lines


@pytest.mark.slow
def test_every_event_reaches_a_failing_receiver_and_the_traces_do_not_change(drift_stream, plain_run,
                                                                             receiver_factory):
    traces, events = plain_run
    receiver = receiver_factory(fail_first=1, delay=0.05)  # slow, and every post fails once
    result = ipfi("explain", str(drift_stream), *EXPLAIN, "--webhook", receiver.url, "--webhook-cooldown", "0",
                  "--metrics-label", "model=hgb")
    assert result.returncode == 0, result.stderr
    assert result.stdout == traces  # the same bytes
    posted = receiver.events()
    assert [p["event"] for p in posted] == events  # every event, in order, as --events writes it
    assert all(p["labels"] == {"model": "hgb"} and p["version"] == 1 and p["text"].startswith("ipfi: ")
               for p in posted)
    assert len({p["id"] for p in posted}) == len(posted)
    assert f"{len(events)} of {len(events)} post(s) delivered; {len(events)} retried attempt(s)" in result.stderr


@pytest.mark.slow
def test_the_command_posts_to_a_receiver_behind_basic_authentication(drift_stream, plain_run, receiver_factory):
    import base64

    _, events = plain_run
    receiver = receiver_factory(authorization="Basic " + base64.b64encode(b"ops:pa55word").decode())
    url = receiver.url.replace("http://", "http://ops:pa55word@")
    result = ipfi("explain", str(drift_stream), *EXPLAIN, "--webhook", url, "--webhook-cooldown", "0")
    assert result.returncode == 0, result.stderr
    assert [p["event"] for p in receiver.events()] == events
    assert "pa55word" not in result.stderr


@pytest.mark.slow
def test_a_receiver_that_is_down_changes_nothing_but_the_count(drift_stream, plain_run):
    traces, events = plain_run
    url = f"http://127.0.0.1:{free_port()}/hook"
    result = ipfi("explain", str(drift_stream), *EXPLAIN, "--webhook", url, "--webhook-retries", "1",
                  "--webhook-cooldown", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout == traces
    assert f"0 of {len(events)} post(s) delivered" in result.stderr
    assert f"{len(events)} failed after retries or refused; the last failed attempt: connection refused" \
        in result.stderr
    assert "/hook" not in result.stderr  # the URL's path (a webhook's token) is not shown


def test_the_alertmanager_payload_is_one_alert_per_event():
    from ipfi_cli.core.events import ChangeEvent
    from ipfi_cli.run.webhook import alertmanager_payload

    event = ChangeEvent(row=10113, feature="salary", kind="importance", direction="down", before=0.34, after=0.05,
                        before_bound=0.02, after_bound=0.3, n_before=4020, n_after=109, start_row=10004,
                        rank_before=1, rank_after=3)
    (alert,) = alertmanager_payload(event, event_id="abc", source="rows.csv", labels={"model": "churn"},
                                    resolve_after=300, job="ipfi-churn")
    # the labels of the shipped rule's alert for the same event (test_rules.py checks them with promtool)
    assert alert["labels"] == {"alertname": "IpfiImportanceChanged", "severity": "warning", "job": "ipfi-churn",
                               "model": "churn", "kind": "importance", "feature": "salary", "direction": "down"}
    assert alert["annotations"]["summary"] == ("ipfi: the importance of salary went down at row 10,113 "
                                               "(from row 10,004): 0.34 -> 0.05")
    from datetime import datetime

    starts, ends = (datetime.fromisoformat(alert[k].replace("Z", "+00:00")) for k in ("startsAt", "endsAt"))
    assert (ends - starts).total_seconds() == 900  # as long as the rule's alert: 15 minutes, not the cooldown's 300 s


@pytest.mark.parametrize("url", ["http://ALICEUSER:S3CR/ET@127.0.0.1:9091", "http://ALICEUSER:S3CR#ET@127.0.0.1:9091",
                                 "http://ALICEUSER:S3#CR/ET?x@127.0.0.1:9091/hook"])
@pytest.mark.parametrize("option", ["--pushgateway", "--webhook"])
def test_a_password_with_an_unencoded_slash_or_hash_is_never_echoed(url, option):
    """A URL parser takes such a password's tail for the host or the path: the usage error says what
    to encode and shows no part of the password."""
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    result = CliRunner().invoke(app, ["explain", "-", "-m", "x.joblib", "-t", "class", option, url], input="")
    assert result.exit_code == 2
    assert "percent-encode" in result.stderr and "ALICEUSER:***@127.0.0.1:9091" in result.stderr
    for secret in ("S3CR", "S3#", "ET@", "/ET", "#ET"):
        assert secret not in result.stderr and secret not in result.stdout
