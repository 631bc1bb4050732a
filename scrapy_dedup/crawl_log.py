"""What a crawl writes per page: the crawl log (``DEDUP_LOG_FILE``, which ``mine-dust`` and the audit
read), the audit file of duplicates (``DEDUP_AUDIT_FILE``), and the cluster canary's WARNING."""
from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

from scrapy import Request
from scrapy.http import Response
from w3lib.url import safe_url_string

from scrapy_dedup.content.engine import Verdict
from scrapy_dedup.content.judge import PageVerdict
from scrapy_dedup.responses import hex_of

__all__ = ["JsonLines", "crawl_log_record", "audit_record", "redirect_record", "ClusterCanary"]

#: the crawl's lines, under the logger they always had
logger = logging.getLogger("scrapy_dedup.extensions")


class JsonLines:
    """An append-only JSON Lines file, flushed per line (a crawl may be killed at any time)."""

    def __init__(self, path: str):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at spider close

    def write(self, record: dict[str, Any]) -> None:
        self.file.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def crawl_log_record(judged: PageVerdict, request: Request | None, url_key: str) -> dict[str, Any]:
    """The crawl-log line of a judged page (``url_key``: its request's canonical URL)."""
    verdict, fp = judged.verdict, judged.fingerprint
    record = {
        "request_url": request.url if request is not None else verdict.url,
        "url": verdict.url,
        "canonical_url": url_key,
        "exact_hash": hex_of(fp.exact),
        "simhash": format(fp.simhash, "016x"),
        "words": fp.words,
        "kind": verdict.kind,
        # the engine's own sameness (exact, or near after verification): mine-dust judges by it
        "cluster": verdict.cluster,
    }
    if judged.basis is not None:  # the URL-level sameness does not hold with the kept page
        record["basis"] = judged.basis
        record["page"] = judged.url_page  # the page it serves at that strictness (mine-dust reads it)
    if judged.normal_hash is not None:
        record["normal_hash"] = judged.normal_hash
    # the URLs that redirected to this page (RedirectMiddleware's meta key): evidence for mine-dust
    redirects = request.meta.get("redirect_urls") if request is not None else None
    if redirects:
        record["redirect_urls"] = [u for u in redirects if isinstance(u, str)]
    return record


def audit_record(verdict: Verdict) -> dict[str, Any]:
    """The audit file's line of a duplicate page."""
    return {"url": verdict.url, "kept_url": verdict.kept_url, "distance": verdict.distance,
            "kind": verdict.kind, "cluster": verdict.cluster, "representative": verdict.representative}


def redirect_record(response: Response, request: Request) -> dict[str, Any] | None:
    """A crawl-log line for a redirect (None: no usable ``Location``): ``mine-dust`` learns aliases from it,
    and the page it leads to may never be logged under this URL (its request is dropped when the page was
    already seen)."""
    location = response.headers.get("Location") if 300 <= response.status < 400 else None
    if not location:
        return None
    try:
        target = response.urljoin(safe_url_string(location.decode("latin-1")))
    except ValueError:  # an unusable Location: RedirectMiddleware will not follow it either
        return None
    return {"request_url": request.url, "url": target, "kind": "redirect", "status": response.status}


class ClusterCanary:
    """A WARNING, once per cluster, when a duplicate cluster grows past ``DEDUP_CANARY_SIZE`` pages."""

    def __init__(self, canary_size: int):
        self.canary_size = canary_size
        self._cluster_sizes: Counter[str] = Counter()
        self._canary_warned: set[str] = set()

    def grew(self, verdict: Verdict) -> bool:
        """Count ``verdict``'s duplicate in its cluster; True (and the WARNING) when it first passes the size."""
        cluster = verdict.cluster or verdict.kept_url or ""
        self._cluster_sizes[cluster] += 1
        size = self._cluster_sizes[cluster] + 1  # the kept page
        if size > self.canary_size and cluster not in self._canary_warned:
            self._canary_warned.add(cluster)
            logger.warning(
                "Duplicate cluster of %s has grown past %d pages (DEDUP_CANARY_SIZE): if these are "
                "different pages, the fingerprint is seeing boilerplate (add DEDUP_STRIP_SELECTORS for "
                "this site, or use DEDUP_CONTENT_ACTION='tag' to audit)", cluster, self.canary_size,
            )
            return True
        return False
