"""The admin port against a browser that another site drives, in real headless Chromium: a login
link that would send the person elsewhere, DNS rebinding, a `no-cors` write from another origin,
framing and scripts from elsewhere (Content-Security-Policy)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
import requests
from playwright.sync_api import Browser, Page

from tests.support.admin import decisions, firing, trajectory
from tests.support.agents import support_run
from tests.support.browser import browser, new_page
from tests.support.pages import PageServer
from tests.support.server import RunningServer, serve_deciding

TOKEN = "browser-attack-token-0123"
EVIL = "evil.example"
REBIND = "rebind.evil.example"  # the attacker's name, its DNS answer rebound to 127.0.0.1
OURS = "sextant.test"  # a name the operator lists in admin.allowed_hosts


@pytest.fixture(scope="module")
def attacked() -> Iterator[Browser]:
    with browser(loopback_names=(EVIL, REBIND, OURS)) as launched:
        yield launched


@pytest.fixture
def guarded(tmp_path: Path) -> Iterator[RunningServer]:
    server = serve_deciding(tmp_path, auth={"tokens": [TOKEN]})
    try:
        yield server
    finally:
        server.stop()


def origin(server: RunningServer, host: str) -> str:
    return f"http://{host}:{server.pipeline.admin.port}"


def test_a_login_link_cannot_send_the_person_to_another_host(
    attacked: Browser, guarded: RunningServer
) -> None:
    """Browsers drop tabs and newlines from a URL: `/<TAB>/evil.example/landed` is
    `//evil.example/landed`, another host. The console answers 400 and the person stays."""
    with PageServer() as evil, new_page(attacked) as page:
        trap = f"/\t/{EVIL}:{evil.port}/landed"
        opened = page.goto(f"{guarded.admin_url}/login?next={quote(trap, safe='')}")
        if opened is not None and opened.status == 200:  # the login form: the person logs in
            page.fill('#login input[name="token"]', TOKEN)
            page.click('#login button[type="submit"]')
            page.wait_for_load_state()
        assert page.url.startswith(guarded.admin_url), page.url
        assert evil.asked == []
        assert opened is not None and opened.status == 400
        assert "next must be a path on this server" in page.content()
        # a plain next still takes the person where they were going
        page.goto(f"{guarded.admin_url}/login?next={quote('/decisions?state=firing', safe='')}")
        page.fill('#login input[name="token"]', TOKEN)
        page.click('#login button[type="submit"]')
        assert page.url == guarded.admin_url + "/decisions?state=firing"


@pytest.mark.parametrize(
    "target",
    [
        "/\t/evil.example/x",
        "/\n/evil.example/x",
        "/\r\nSet-Cookie: a=b",
        "/\v/evil",
        "/\f/evil",
        "/\0/evil",
        "//evil.example/x",
        "https://evil.example/x",
        "/\\evil.example",
        "/ /evil",
        "javascript:alert(1)",
        "/é",
    ],
    ids=repr,
)
def test_login_answers_400_to_a_next_that_is_not_a_plain_local_path(
    guarded: RunningServer, target: str
) -> None:
    url = guarded.admin_url + "/login"
    form = {"token": TOKEN, "next": target}
    reply = requests.post(url, data=form, timeout=5, allow_redirects=False)
    assert reply.status_code == 400, reply.headers.get("Location")
    assert "Location" not in reply.headers
    assert requests.get(url, params={"next": target}, timeout=5).status_code == 400
    ok = requests.post(
        url, data={**form, "next": "/trajectories?service=a%20b"}, timeout=5, allow_redirects=False
    )
    assert ok.status_code == 303 and ok.headers["Location"] == "/trajectories?service=a%20b"


def rebound(page: Page, server: RunningServer, host: str) -> dict:
    """What a page served under `host` reads and does on the collector: its console, the API,
    a SQL query through the console's form, all same-origin for the browser."""
    base = origin(server, host)
    home = page.goto(base + "/")
    assert home is not None
    return page.evaluate(
        """async (home) => {
            const api = await fetch('/api/v1/decisions?state=firing');
            const page = await (await fetch('/sql')).text();  // same-origin: readable
            const csrf = (page.match(/name="csrf" value="([^"]*)"/) || ['', ''])[1];
            const form = new URLSearchParams({sql: 'SELECT 42 AS answer', output: 'table',
                                              max_rows: '10', csrf});
            const sql = await fetch('/sql', {method: 'POST', body: form});
            return {home, api: api.status, apiText: await api.text(), sql: sql.status,
                    metrics: (await fetch('/metrics')).status};
        }""",
        home.status,
    )


def test_a_rebound_dns_name_reads_nothing(attacked: Browser, quarantined: RunningServer) -> None:
    """A page of the attacker's name, rebound to 127.0.0.1, is same-origin with the collector
    for the browser: the Host it sends is the only tell."""
    with new_page(attacked) as page:
        seen = rebound(page, quarantined, REBIND)
        assert (seen["home"], seen["api"], seen["sql"]) == (403, 403, 403), seen
        assert "QUARANTINE" not in seen["apiText"]
        assert "admin.allowed_hosts" in page.content()
        assert seen["metrics"] == 200  # open by design: counts, never a run
    with new_page(attacked) as page:
        seen = rebound(page, quarantined, "localhost")
        assert (seen["home"], seen["api"], seen["sql"]) == (200, 200, 200), seen
        assert "QUARANTINE" in seen["apiText"]


def test_a_name_in_allowed_hosts_opens_the_console(attacked: Browser, tmp_path: Path) -> None:
    server = serve_deciding(tmp_path, admin={"allowed_hosts": [OURS]})
    try:
        trajectory(server, support_run(server, approve=True))
        trajectory(server, support_run(server, approve=False))
        firing(server, "QUARANTINE")
        for host in (OURS, "127.0.0.1"):
            with new_page(attacked) as page:
                seen = rebound(page, server, host)
                assert (seen["home"], seen["api"], seen["sql"]) == (200, 200, 200), (host, seen)
                assert "QUARANTINE" in seen["apiText"]
    finally:
        server.stop()


def test_peers_and_probes_reach_the_admin_port_by_their_own_names(tmp_path: Path) -> None:
    """cluster.peers call each other by the names in that list; Prometheus and the kubelet
    reach /metrics, /healthz and /readyz by any name (service names, pod IPs)."""
    server = serve_deciding(tmp_path, cluster={"peers": ["http://replica-1.replicas.test:9464"]})
    try:
        url = server.admin_url
        peer = {"Host": "replica-1.replicas.test:9464"}
        reply = requests.post(f"{url}/api/v1/sql", json={"sql": "SELECT 1 AS one"}, headers=peer)
        assert reply.status_code == 200, reply.text
        stranger = {"Host": "sextant-a:9464"}
        assert requests.get(f"{url}/api/v1/targets", headers=stranger).status_code == 403
        for path in ("/metrics", "/healthz", "/readyz"):
            assert requests.get(url + path, headers=stranger).status_code == 200, path
        by_address = {"Host": "10.1.2.3:9464"}  # a pod IP: no DNS name to rebind
        assert requests.get(f"{url}/api/v1/targets", headers=by_address).status_code == 200
    finally:
        server.stop()


NO_CORS = """async ([admin, decision]) => {
    const send = (path, body) => fetch(admin + path, {
        method: 'POST', mode: 'no-cors', headers: {'Content-Type': 'text/plain'}, body});
    await send('/api/v1/decisions/' + decision + '/resolve', JSON.stringify({by: 'mallory'}));
    await send('/api/v1/baselines', JSON.stringify({name: 'planted', service: 'support-desk'}));
    await send('/api/v1/alerts/test', '{}');
    return 'sent';
}"""


def test_a_no_cors_write_from_another_origin_changes_nothing(
    attacked: Browser, quarantined: RunningServer
) -> None:
    """A page on another loopback port (the same site, another origin) posts `text/plain`
    JSON, which a browser sends without a preflight, to a collector without tokens."""
    decision = firing(quarantined, "QUARANTINE")["decision_id"]
    with PageServer() as elsewhere, new_page(attacked) as page:
        page.goto(elsewhere.url() + "/")
        assert page.evaluate(NO_CORS, [quarantined.admin_url, decision]) == "sent"
    assert [d["decision_id"] for d in decisions(quarantined, state="firing")] == [decision]
    baselines = requests.get(quarantined.admin_url + "/api/v1/baselines", timeout=5).json()
    assert baselines["baselines"] == []


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "text/plain"}, 415),
        ({"Content-Type": "application/x-www-form-urlencoded"}, 415),
        ({}, 415),
        ({"Content-Type": "application/json", "Origin": "http://127.0.0.1:1"}, 403),
        ({"Content-Type": "application/json", "Origin": "null"}, 403),
        ({"Content-Type": "application/json", "Sec-Fetch-Site": "same-site"}, 403),
        ({"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403),
    ],
    ids=repr,
)
def test_api_writes_refuse_what_a_page_elsewhere_can_send_even_with_the_token(
    guarded: RunningServer, headers: dict[str, str], status: int
) -> None:
    url = guarded.admin_url
    for path in ("/api/v1/alerts/test", "/api/v1/baselines", "/api/v1/decisions/d-1/ack"):
        sent = {**guarded.auth_headers, **headers}
        reply = requests.post(url + path, data=b'{"by": "x"}', headers=sent, timeout=5)
        assert reply.status_code == status, (path, reply.text)
    own = {**guarded.auth_headers, "Origin": url, "Sec-Fetch-Site": "same-origin"}
    reply = requests.post(url + "/api/v1/alerts/test", json={}, headers=own, timeout=5)
    assert reply.status_code == 200, reply.text


# Installed before any page script (through the browser's debugging protocol, which the page's
# policy does not govern): every violation the page reports.
VIOLATIONS = """window.violations = [];
document.addEventListener('securitypolicyviolation',
    (e) => window.violations.push(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}`));"""


def test_every_console_page_works_under_its_content_security_policy(
    attacked: Browser, quarantined: RunningServer
) -> None:
    decision = firing(quarantined, "QUARANTINE")["decision_id"]
    url = quarantined.admin_url
    trace = requests.get(url + "/api/v1/trajectories", timeout=5).json()["trajectories"][0]
    pages = {
        "/": 200,
        "/trajectories": 200,
        f"/trajectories/{trace['trace_id']}": 200,
        "/trajectories/00000000000000000000000000000000": 404,
        "/sessions": 200,
        "/sessions/no-such-session": 404,
        "/decisions": 200,
        f"/decisions/{decision}": 200,
        "/decisions/d-nope": 404,
        "/target?service=support-desk": 200,
        "/packs": 200,
        "/sql": 200,
        "/login": 200,
    }
    with new_page(attacked) as page:
        page.add_init_script(VIOLATIONS)
        logged: list[str] = []
        page.on("console", lambda message: logged.append(message.text))
        for path, status in pages.items():
            opened = page.goto(url + path)
            assert opened is not None and opened.status == status, path
            policy = opened.headers["content-security-policy"]
            assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
            assert opened.headers["x-content-type-options"] == "nosniff"
            assert opened.headers["referrer-policy"] == "same-origin"
            if path.startswith("/trajectories/") and status == 200:
                # the waterfall without inline styles: one bar per step, placed and indented
                steps = page.locator("table.steps tbody tr")
                assert page.locator("svg.lane rect.bar").count() == steps.count() > 0
                padding = page.locator("table.steps td.step").first.evaluate(
                    "td => getComputedStyle(td).paddingLeft"
                )
                assert padding != "0px"
            assert page.evaluate("window.violations") == [], path
        # the SQL page's script (fetch, swap in the answer) runs under the policy
        page.goto(url + "/sql")
        page.fill("#sql", "SELECT 42 AS answer")
        page.click('button[value="table"]')
        page.wait_for_function("() => document.querySelector('#rows') !== null")
        assert page.locator("#rows tbody td").first.inner_text() == "42"
        # a form the console posts, then the redirect it answers, under form-action 'self'
        page.goto(f"{url}/decisions/{decision}")
        page.fill('#ack input[name="by"]', "ana")
        page.click('#ack button[type="submit"]')
        assert page.url == f"{url}/decisions/{decision}"
        assert page.evaluate("window.violations") == []
    assert [m for m in logged if "Content Security Policy" in m] == []


def test_no_page_of_another_origin_can_frame_the_console(
    attacked: Browser, quarantined: RunningServer
) -> None:
    html = f'<!doctype html><iframe id="console" src="{quarantined.admin_url}/"></iframe>'
    with PageServer(html) as elsewhere, new_page(attacked) as page:
        page.goto(elsewhere.url() + "/")
        framed = [f for f in page.frames if f is not page.main_frame]
        assert len(framed) == 1
        assert framed[0].locator("#targets").count() == 0  # blocked: no table of targets
    rebound_host = {"Host": f"{REBIND}:{urlsplit(quarantined.admin_url).port}"}
    answers = [
        (path, requests.get(quarantined.admin_url + path, timeout=5))
        for path in ("/api/v1/targets", "/api/v1/nothing", "/metrics", "/static/console.css")
    ] + [("Host check", requests.get(quarantined.admin_url + "/", headers=rebound_host, timeout=5))]
    assert answers[3][1].status_code == 200 and answers[4][1].status_code == 403
    for path, reply in answers:
        assert reply.headers["X-Content-Type-Options"] == "nosniff", path
        assert reply.headers["X-Frame-Options"] == "DENY", path
        assert "frame-ancestors 'none'" in reply.headers["Content-Security-Policy"], path
