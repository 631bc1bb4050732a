"""Mining of one host's URL set: candidates counted, validated kind by kind on every URL they touch, kept
rules put in force round after round. This module imports nothing from Scrapy."""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import replace

from scrapy_dedup.content.clusters import Clusters
from scrapy_dedup.url.dust import (
    DustRule,
    DustRulesError,
    HostRules,
    check_host,
    join_key,
    shape_of_segment,
    split_key,
)
from scrapy_dedup.url.mining.candidates import _candidates, _describe_candidate, _has_token, _params, _rule_of, \
    redact_url
from scrapy_dedup.url.mining.config import _VALUE_SHAPE_ORDER, HostReport, MiningConfig, MiningResult, RuleValidation


class _HostMiner:
    """Mining of one host's URL set."""

    def __init__(self, host: str, urls: dict[str, int], contents: Clusters[int], config: MiningConfig,
                 result: MiningResult, base_rules: list[DustRule], report: HostReport | None = None,
                 item_of: dict[int, int] | None = None, noise: tuple[int, int] = (0, 0),
                 simhash_of: dict[int, int] | None = None, noise_bits: int = 0):
        self.host = host
        #: content id -> its page at the judge's item-level strictness (the log's ``cluster``), when logged
        self.item_of = item_of or {}
        #: the site's noise: (URLs recorded again judged another page, URLs recorded again)
        self.noise = noise
        #: content id -> simhash; two pages of other clusters are proven distinct only when further apart than
        #: ``noise_bits``, the most two pages of one cluster were apart on this host
        self.simhash_of = simhash_of or {}
        self.noise_bits = noise_bits
        self.report = report or HostReport(host)
        self.config = config
        self.result = result
        self.rules: list[DustRule] = []
        self.known = {r.key for r in base_rules}
        # the rules in force (given and kept so far): a candidate's result is judged after them, as the
        # crawl would apply them together (``/w/index.php?title=Git`` -> ``/wiki/Git`` -> ``/wiki/git``)
        self.applied: list[DustRule] = list(base_rules)
        self.in_force = HostRules(host, self.applied)
        representative = contents.representative
        # content ids resolved to their near-duplicate cluster, once; in a fixed order (shortest URL first),
        # never the log's: every choice below that takes the first of equals (the URLs of one page paired,
        # candidates of equal counts, the page two rewritten URLs collide on) is then the same for any
        # crawl order
        resolved = {k: representative(urls[k]) for k in sorted(urls, key=_url_order)}
        if base_rules:
            resolved = self._rewrite(resolved, HostRules(host, base_rules))
        self.urls = resolved
        self.validations: dict[tuple, RuleValidation] = {}  # rule key -> its latest validation

    def run(self) -> list[DustRule]:
        for _ in range(self.config.rounds):
            new = self._round()  # the URL set is rewritten by the new rules as they are kept
            if not new:
                break
            self.rules.extend(new)
        self.result.validations.extend(self.validations.values())
        return self.rules

    @staticmethod
    def _rewrite(urls: dict[str, int], rules: HostRules) -> dict[str, int]:
        """The URL set under ``rules``, in the fixed order. Where URLs collide (a rule's rare violation), the
        page of the URL that is its own rewrite wins, else the first in the fixed order."""
        out: dict[str, int] = {}
        moved: list[tuple[str, int]] = []
        for key, cid in urls.items():
            path, query = split_key(key)
            new_path, new_query = rules.apply(path, query)
            if new_path == path and new_query == query:
                out[key] = cid
            else:
                moved.append((join_key(new_path, new_query), cid))
        for new_key, cid in moved:
            out.setdefault(new_key, cid)
        return {key: out[key] for key in sorted(out, key=_url_order)}

    # --- one round: candidates from same-content pairs, then validation kind by kind ---

    def _round(self) -> list[DustRule]:
        cfg = self.config
        sizes: Counter[int] = Counter(self.urls.values())
        self.boilerplate = {c for c, n in sizes.items() if n > cfg.max_cluster_urls}
        members: dict[int, list[str]] = {}
        for key, cid in self.urls.items():
            if sizes[cid] > 1:  # a page behind very many URLs gives context candidates only (below)
                members.setdefault(cid, []).append(key)
        counts: Counter[tuple] = Counter()
        for cid, keys in members.items():
            # every pair of the first (shortest) URLs of the page, and the shortest with each of the others:
            # a form only the page's later URLs carry is still seen (pairs grow linearly past the first ones)
            found: set[tuple] = set()
            head = min(len(keys), cfg.max_pair_members)
            for i in range(head):
                for j in range(i + 1, head):
                    _candidates(keys[i], keys[j], found)
            # a later URL is paired with the first of its own path too: a view's query forms pair with each
            # other even when the page's shortest URLs are all path forms (MediaWiki's login form behind
            # ``/index.php/Special:...`` paths, then ``?title=Special:UserLogin&returnto=<every page>``)
            first_of_path: dict[str, str] = {}
            for key in keys[:head]:
                first_of_path.setdefault(split_key(key)[0], key)
            for j in range(head, len(keys)):
                _candidates(keys[0], keys[j], found)
                first = first_of_path.setdefault(split_key(keys[j])[0], keys[j])
                if first not in (keys[0], keys[j]):
                    _candidates(first, keys[j], found)
            if cid in self.boilerplate:
                found = {cand for cand in found if cand[0] == "context"}
            counts.update(found)
            # a context rule folds the many URLs of one view (recent changes, a login form, linked with every
            # page's id): its evidence is the URLs of that view, not distinct pages
            for cand in found:
                if cand[0] == "context":
                    counts[cand] += len(keys) - 2
        counts = _widen_values(counts)
        report = self.report
        report.pages_with_aliases = max(report.pages_with_aliases, len(members))
        report.candidates += len(counts)
        del members
        by_kind: dict[str, list[tuple]] = {}
        for cand, n in sorted(counts.items(), key=_count_order):  # most frequent first, ties by the candidate
            if n < cfg.min_support:
                if len(report.below_support) < 10:
                    report.below_support.append((_describe_candidate(cand), n))
                continue
            by_kind.setdefault(cand[0], []).append(cand)
        kept: list[DustRule] = []
        self._index()
        for kind in ("drop_pathparam", "drop_segment", "case_insensitive", "param", "context", "query_to_path",
                     "substitute"):
            cands = by_kind.get(kind, [])[: cfg.max_candidates]
            if kind == "drop_segment":  # a token with its literal segment first: dropped alone, '/s/' would stay
                cands.sort(key=lambda cand: not cand[2])
            new: list[DustRule] = []
            if kind == "param":
                new = self._param_rules(cands)
            elif kind == "query_to_path":
                new = self._q2p_rules(cands)
            elif kind == "substitute":
                new = self._substitutions(cands)
            else:
                for cand in cands:
                    rule = _rule_of(cand)
                    if rule is not None and rule.key not in self.known:
                        verdict = self._judge(rule)
                        if verdict.kept:
                            new.append(verdict.rule)
                            if kind == "drop_segment":  # in force at once: the token alone is judged after it
                                self._keep([verdict.rule])
            if new:  # later kinds are judged on the URLs these rules already rewrote (rules compose)
                kept.extend(new)
                self._keep([r for r in new if r.key not in self.known])
        return kept

    def _proven_distinct(self, a: int, b: int) -> bool:
        item_of, simhash_of = self.item_of, self.simhash_of
        if a not in item_of or b not in item_of or item_of[a] == item_of[b]:
            return False
        if a not in simhash_of or b not in simhash_of:
            return False
        return bin(simhash_of[a] ^ simhash_of[b]).count("1") > self.noise_bits

    def _noise_allowance(self, pairs: int) -> float:
        """Violations proven distinct a rule judged on ``pairs`` URL pairs may have: as many as the site's own
        noise would give (the share of URLs fetched again that the judge called another page), none where
        the crawl measured no noise: a judge that tells two pages apart is believed unless the site shows
        it calls one page two."""
        changed, again = self.noise
        return pairs * changed / again if again else 0.0

    def _keep(self, rules: list[DustRule]) -> None:
        """Put ``rules`` in force: the URL set is rewritten by every rule kept so far."""
        if not rules:
            return
        self.known.update(r.key for r in rules)
        self.applied.extend(rules)
        self.in_force = HostRules(self.host, self.applied)
        self.urls = self._rewrite(self.urls, self.in_force)
        self._index()

    def _index(self) -> None:
        by_param: dict[str, list[str]] = {}
        by_path: dict[str, list[str]] = {}
        for key in self.urls:
            path, query = split_key(key)
            if query:
                by_path.setdefault(path, []).append(key)
                for name, _ in _params(query):
                    by_param.setdefault(name, []).append(key)
        self.by_param = by_param
        self.by_path = by_path

    def _pages_named_by(self, name: str, dropped: list[tuple[str, str]]) -> int:
        """Pages whose URLs all carry one value of ``name``, whatever other parameters ride along, on a path
        where another page is seen with another value or none: what a drop of ``name`` merges (``dropped``:
        the (path, query) it rewrites).

        The rewritten URLs may never collide: page 2 of a list seen only as ``?pagenum=2&sid=...`` variants
        and page 3 only as ``?pagenum=3&cmp=...``, while ``?pagenum=1`` is the list itself (the support).
        A value seen on a page beside another value or none (a tracking or session value) names nothing;
        a value on two pages of one path neither."""
        urls = self.urls
        boilerplate = self.boilerplate
        values_of: dict[tuple[str, int], set[str | None]] = {}  # (path, page) -> its values (None: without)
        fetched: Counter[tuple[str, int]] = Counter()  # (path, page) -> its URLs ``dropped`` rewrites
        pages_of: dict[tuple[str, str | None], set[int]] = {}  # (path, value) -> pages
        for path, query in dropped:
            cid = urls[join_key(path, query)]
            if cid in boilerplate:
                continue
            value = _value_of(query, name)
            values_of.setdefault((path, cid), set()).add(value)
            fetched[path, cid] += 1
            pages_of.setdefault((path, value), set()).add(cid)
        for path in {path for path, _ in values_of}:  # the same pages without the parameter
            for key in (*self.by_path.get(path, ()), *((path,) if path in urls else ())):
                values = values_of.get((path, urls[key]))
                if values is not None and _value_of(split_key(key)[1], name) is None:
                    values.add(None)
        free = {value for values in values_of.values() if len(values) > 1 for value in values}
        values_at: dict[str, list[set[str | None]]] = {}  # path -> the value sets of its pages
        for (path, _), values in values_of.items():
            values_at.setdefault(path, []).append(values)
        named = 0
        for (path, cid), values in values_of.items():
            if fetched[path, cid] < 2 or len(values) != 1:
                continue
            value = next(iter(values))
            if (value is not None and value not in free and len(pages_of[path, value]) == 1
                    and any(other != values for other in values_at[path])):
                named += 1
        return named

    def _param_rules(self, cands: list[tuple]) -> list[DustRule]:
        """Per parameter, the most general prefix first: ``drop_param`` there, else ``default_param`` there,
        then the next prefix. A default value before a narrower drop: where dropping ``lang`` merges
        ``?lang=de`` under ``/``, ``?lang=en`` is the default under ``/``, not a drop under the few prefixes
        where no translation happened to be fetched (nor a drop under a prefix a default was kept for: the
        default says the other values are other pages)."""
        kept: list[DustRule] = []
        # ("param", name, value or None, prefix) -> trials ordered by prefix length, the drop first
        trials = sorted({(cand[1], cand[3], cand[2]) for cand in cands},
                        key=lambda t: (t[0], len(t[1]), t[1], t[2] is not None, t[2] or ""))
        dropped: set[str] = set()
        defaults: set[tuple[str, str]] = set()
        defaulted: dict[str, list[str]] = {}  # name -> prefixes of its kept defaults
        for name, prefix, value in trials:
            if name in dropped or (value is not None and (name, value) in defaults):
                continue
            if value is None and any(prefix.startswith(p) for p in defaulted.get(name, ())):
                continue
            if value is None:
                rule = DustRule("drop_param", param=name, prefix=prefix)
            else:
                rule = DustRule("default_param", param=name, value=value, prefix=prefix)
            if rule.key in self.known:
                if value is None:
                    dropped.add(name)
                else:
                    defaults.add((name, value))
                continue
            verdict = self._judge(rule)
            if verdict.kept:
                kept.append(verdict.rule)
                if value is None:
                    dropped.add(name)
                else:
                    defaults.add((name, value))
                    defaulted.setdefault(name, []).append(prefix)
        return kept

    def _q2p_rules(self, cands: list[tuple]) -> list[DustRule]:
        """One ``query_to_path`` per (path, parameter), the best supported target first: at the widest value
        shape seen (:func:`_widen_values`), else narrower ones (a wider shape may merge more)."""
        kept: list[DustRule] = []
        done: set[tuple[str, str]] = set()
        for _, path, param, widest, to in cands:
            for shape in reversed(_VALUE_SHAPE_ORDER[: _VALUE_SHAPE_ORDER.index(widest) + 1]):
                if (path, param) in done:
                    break
                rule = _rule_of(("query_to_path", path, param, shape, to))
                if rule is None or rule.key in self.known:
                    continue
                verdict = self._judge(rule)
                if verdict.kept:
                    kept.append(verdict.rule)
                    done.add((path, param))
        return kept

    def _substitutions(self, cands: list[tuple]) -> list[DustRule]:
        """Each (anchor, a, b) pair is tried in both directions; the better one is kept, if any."""
        kept: list[DustRule] = []
        done: set[tuple] = set()
        for cand in cands:
            _, anchor, a, b = cand
            if (anchor, a, b) in done:
                continue
            done.add((anchor, a, b))
            best: RuleValidation | None = None
            verdicts = []
            if any(DustRule("substitute", anchor=anchor, from_=old, to=new).key in self.known
                   for old, new in ((a, b), (b, a))):
                continue  # one direction is kept (an earlier round): the other would undo it
            for old, new in ((a, b), (b, a)):
                try:
                    rule = DustRule("substitute", anchor=anchor, from_=old, to=new)
                    rule.check()
                except ValueError:
                    continue
                verdict = self._judge(rule, record=False)
                verdicts.append(verdict)
                if verdict.kept and (best is None or _preference(verdict) > _preference(best)):
                    best = verdict
            for verdict in verdicts:
                if verdict is not best and best is not None:
                    verdict.kept, verdict.reason = False, "the other direction is better supported"
                self.validations[verdict.rule.key] = verdict
            if best is not None:
                # kept one by one, the URL set rewritten at once: a later candidate (the same piece to
                # another target, '/en/' -> '/mobile/' after '/en/' -> '/'; a longer piece a kept one
                # explains, '/old/tools/' after '/old/') is judged on what is left and finds no support
                kept.append(best.rule)
                self._keep([best.rule])
        return kept

    def _affected(self, rule: DustRule) -> Iterable[str]:
        if rule.kind in ("drop_param", "default_param", "drop_param_when"):
            return self.by_param.get(rule.param, ())
        if rule.kind == "query_to_path":
            return self.by_path.get(rule.path, ())
        if rule.kind == "drop_pathparam":
            return (k for k in self.urls if f";{rule.param}=" in split_key(k)[0])
        if rule.kind == "substitute" and rule.anchor == "prefix":
            return (k for k in self.urls if k.startswith(rule.from_))
        if rule.kind == "substitute":
            return (k for k in self.urls if split_key(k)[0].endswith(rule.from_))
        return self.urls

    def _uncovered(self, forms: dict[str, tuple[str, str]], groups: dict[str, list[int]]) -> int:
        """URLs a substitution rewrites to a URL never fetched (no evidence either way) whose rest (what the
        rule leaves alone) is of a form no agreeing pair had: counted as violations. The evidence shows the
        rule on the forms it was seen on only: Fossil's ``/info/<id>`` is ``/tktview/<id>`` for a ticket's
        10-digit id, while ``/info/<check-in hash>`` shows a check-in and ``/tktview/<that hash>`` an empty
        ticket; the hash's length (another form) is what tells the crawl apart before the fetch."""
        urls = self.urls
        covered = {form for key, (target, form) in forms.items() if urls.get(target) == urls[key]}
        return sum(1 for key, (target, form) in forms.items()
                   if target not in urls and len(groups.get(target, ())) == 1 and form not in covered)

    def _judge(self, rule: DustRule, record: bool = True) -> RuleValidation:
        cfg = self.config
        compiled = HostRules(self.host, [rule])
        in_force = self.in_force.apply
        urls = self.urls
        groups: dict[str, list[int]] = {}
        examples: list[tuple[str, str]] = []
        named: list[tuple[str, str]] | None = [] if rule.kind in ("drop_param", "drop_param_when") else None
        # a substitution maps each URL to a URL of its own: a target never fetched is no evidence either way,
        # so the forms of what it leaves alone are noted (see ``uncovered`` below)
        forms: dict[str, tuple[str, str]] | None = {} if rule.kind == "substitute" else None
        for key in self._affected(rule):
            path, query = split_key(key)
            new_path, new_query = compiled.apply(path, query)
            if new_path == path and new_query == query:
                continue
            target = join_key(*in_force(new_path, new_query))
            if target == key:  # the rules in force undo it ('/recipes/' -> '/old/Recipes/' -> '/recipes/')
                continue
            groups.setdefault(target, []).append(urls[key])
            if len(examples) < cfg.examples and target in urls and urls[target] == urls[key]:
                examples.append((redact_url(key), redact_url(target)))  # no visitor's session in a rules file
            if named is not None:
                named.append((path, query))
            if forms is not None:
                forms[key] = (target, _rest_form(rule, path))
        support = violations = distinct = 0
        item_of = self.item_of
        agreeing: dict[int, int] = {}  # reference page -> agreeing URLs
        targets_of: Counter[int] = Counter()  # reference page -> distinct rewritten URLs it stands for
        boilerplate = self.boilerplate
        for target, cids in groups.items():
            ref = urls.get(target)
            if ref is None:
                if len(cids) < 2:
                    continue  # nothing to compare with: neither support nor violation
                ref, n = Counter(cids).most_common(1)[0]
                agree, disagree = n - 1, len(cids) - n
            else:
                agree = sum(1 for c in cids if c == ref)
                disagree = len(cids) - agree
            violations += disagree
            if disagree and item_of and ref in item_of:
                # pages of two clusters (distinct even by the judge's lenient, item-level strictness) further apart
                # than any two pages of one cluster on this site
                distinct += sum(1 for c in cids if c != ref and self._proven_distinct(c, ref))
            if agree:
                agreeing[ref] = agreeing.get(ref, 0) + agree
                targets_of[ref] += 1
        # One page that stays behind three or more different URLs after the rewrite is a page many URLs
        # return (a soft 404, an error or login page): it says nothing about the rule.
        # (Three or more: one page may still stand for two URLs when another, not yet mined, DUST
        # dimension separates them.)
        # A context rule is narrow by construction: the one view it folds stands behind many URLs by nature,
        # so its evidence is the URLs that agree (at least ``min_support`` of them), not distinct pages.
        context = rule.kind == "drop_param_when"
        repeated = set() if context else {c for c, n in targets_of.items() if n > 2} | (set(agreeing) & boilerplate)
        pages = set(agreeing) - repeated
        support = sum(agreeing[c] for c in pages)
        if named:
            violations += self._pages_named_by(rule.param, named)
        uncovered = self._uncovered(forms, groups) if forms else 0
        violations += uncovered
        rate = violations / (support + violations) if support + violations else 0.0
        if context and support < 2 * cfg.min_support:
            # one view linked with every page's id folds dozens of URLs; a page's own few views (an old
            # revision and its diffs under ``title=X``) are no context, and the judge's leniency there is no rule
            reason = f"support from {support} URL(s) < {2 * cfg.min_support} (twice min_support, a context rule)"
            kept = False
        elif not context and len(pages) < cfg.min_support:
            reason = f"support from {len(pages)} distinct page(s) < {cfg.min_support}"
            if repeated:
                reason += (f" ({len(repeated)} page(s) returned for many different URLs ignored: "
                           "a soft 404 or error page)")
            kept = False
        elif distinct > self._noise_allowance(support + violations):
            changed, again = self.noise
            reason = (f"merges {distinct} page(s) the judge proves distinct (other clusters), more than the site's "
                      f"own noise allows ({changed} of {again} URL(s) fetched again judged another page)")
            kept = False
        elif rate > cfg.max_violation_rate:
            reason = f"violation rate {rate:.1%} > {cfg.max_violation_rate:.1%}: the rewrite merges different pages"
            if uncovered:
                reason += f" ({uncovered} of them URLs of a form no pair of the evidence had)"
            kept = False
        else:
            reason = f"violation rate {rate:.1%}"
            kept = True
        evidenced = replace(rule, support=support, support_pages=len(pages), violations=violations,
                            examples=tuple(examples))
        verdict = RuleValidation(self.host, evidenced, support, len(pages), violations, kept, reason)
        if record:
            self.validations[rule.key] = verdict
        return verdict


def _rest_form(rule: DustRule, path: str) -> str:
    """The form of the segment a substitution leaves next to its literal (after a prefix, before a suffix):
    the exact shape of a generated token (a hash, an id: its length names the kind of object, Fossil's
    10-digit ticket ids beside its 16- and 64-digit artifact hashes), ``digits`` for a number, else ``name``."""
    if rule.anchor == "prefix":
        segment = path[len(rule.from_):].split("/", 1)[0]
    else:
        segment = path[: len(path) - len(rule.from_)].rsplit("/", 1)[-1]
    if segment.isdigit():
        return "digits"
    if _has_token(segment) and re.fullmatch(r"[A-Za-z0-9]+", segment):
        return shape_of_segment(segment) or "name"
    return "name"


def _value_of(query: str, name: str) -> str | None:
    return next((value for n, value in _params(query) if n == name), None)


def _loadable(host: str, base: list[DustRule], kept: list[DustRule], result: MiningResult) -> list[DustRule]:
    """``kept`` without the substitutions that would make the host's rules refused at load (they rewrite
    each other's results in a cycle): the latest kept goes first. The miner never writes a file the
    crawl cannot load."""
    kept = list(kept)
    while True:
        try:
            check_host(base + kept, host)
            return kept
        except DustRulesError:
            if not kept:
                return kept
            last = next((i for i in range(len(kept) - 1, -1, -1) if kept[i].kind == "substitute"), len(kept) - 1)
            dropped = kept.pop(last)
            result.stats["rules_dropped_cycle"] += 1
            for validation in result.validations:
                if validation.host == host and validation.rule.key == dropped.key:
                    validation.kept = False
                    validation.reason = "would rewrite the results of kept substitutions in a cycle"


def _widen_values(counts: Counter[tuple]) -> Counter[tuple]:
    """``query_to_path`` candidates that differ only in the value's shape become one, at the widest shape seen,
    counted on all their pages: ``Special:AllPages`` is a ``path``, ``Main_Page`` a ``slug``, ``Git`` an
    ``alnum`` (three candidates each short of support on a wiki, one rule of its titles)."""
    widest: dict[tuple, str] = {}
    total: Counter[tuple] = Counter()
    out: Counter[tuple] = Counter()
    for cand, n in counts.items():
        if cand[0] != "query_to_path":
            out[cand] = n
            continue
        _, path, param, shape, to = cand
        group = (path, param, to)
        total[group] += n
        if _VALUE_SHAPE_ORDER.index(shape) > _VALUE_SHAPE_ORDER.index(widest.get(group, "digits")):
            widest[group] = shape
    for (path, param, to), n in total.items():
        out["query_to_path", path, param, widest.get((path, param, to), "digits"), to] = n
    return out


def _url_order(key: str) -> tuple[int, str]:
    """The miner's fixed order of a host's URLs (shortest first, then the text): never the crawl's."""
    return len(key), key


def _count_order(item: tuple[tuple, int]) -> tuple[int, str]:
    """Candidates most frequent first, equal counts by the candidate's text (not by when it was found)."""
    return -item[1], repr(item[0])


def _preference(verdict: RuleValidation) -> tuple:
    """Between two directions of a substitution: more support, fewer violations, then the longer target
    (``.htm`` -> ``.html``, ``/~editors/`` -> ``/people/editors/``: the spelled-out form), then the text."""
    rule = verdict.rule
    return verdict.support, -verdict.violations, len(rule.to), rule.to
