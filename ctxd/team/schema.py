"""The team database's schema (version 1), as SQL that ``ctxd team init`` runs (:mod:`ctxd.team.migrate`).

Everything lives in the schema ``ctxd``:

- ``meta``: ``schema_version``, ``retention_months`` (0: keep everything).
- ``grants``: which role sees which project (``*``: every project); members of a role see what it is granted.
- ``sessions``: one row per session (project, agent, user, machine, path, cwd, first and last time, its must-keep
  facts as JSON).
- ``messages``: one row per entry, keyed by (session, entry, time), partitioned by month on the entry's time
  (``messages_YYYY_MM``), with a stored ``tsvector`` over its text and a GIN index on it (one per partition), and
  a (project, time) index for the filters; where the server has ``btree_gin``, one GIN index on (project,
  tsvector) does both (:data:`INDEXES_BTREE_GIN`).

Row-level security on both tables: a role reads (and writes) only the rows of projects it is granted, and writes
only rows it published itself (``published_by``). Publishers need no DDL rights: ``ensure_month`` makes a
month's partition (SECURITY DEFINER, serialised by an advisory lock) and ``drop_expired`` drops the partitions
older than ``retention_months``.

Search goes through ``search()``, a SECURITY DEFINER function that applies the caller's grants itself. The
reason: under row-level security PostgreSQL evaluates a query's own conditions only after the policy's, unless
they are leakproof, and the full-text match operator (``@@``, ``ts_match_vq``) is not; so a role's search could
not use the GIN index and would read every row of its projects. ``search()`` filters by the same grants
(``projects_of``) with the index. The caller is the role the session acts as (``SET ROLE``) or its login role,
exactly what ``current_user`` is outside the function; arguments cannot widen it.
"""

from __future__ import annotations

SCHEMA_VERSION = 1
"""The schema version this ctxd reads and writes; a database with a higher one is refused."""
TS_CONFIG = "english"
"""The text search configuration of the stored tsvector and of every query (one for both, or nothing matches)."""
GROUP_ROLE = "ctxd_team"
"""The role whose members may publish and search (``ctxd team grant`` makes a role a member)."""
HEADLINE = 'StartSel=«, StopSel=», MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "'
HEADLINE_CHARS = 20_000
"""A snippet is cut from a hit's first characters only (``ts_headline`` parses the whole text it is given)."""

CANDIDATES = 1000
"""A query is ranked among the first this many messages it matches, newest month first (ranking every match of a
common word would read millions of rows): a narrower query or a filter ranks exactly."""

_SEES = "(SELECT ctxd.sees_all()) OR project = ANY (ARRAY(SELECT unnest(ctxd.projects_of(current_user))))"

CREATE = f"""
CREATE SCHEMA IF NOT EXISTS ctxd;
CREATE TABLE IF NOT EXISTS ctxd.meta(key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS ctxd.grants(role name NOT NULL, project text NOT NULL, PRIMARY KEY (role, project));
CREATE TABLE IF NOT EXISTS ctxd.sessions(
  session_id text PRIMARY KEY,
  project text NOT NULL, agent text NOT NULL, user_name text NOT NULL, machine text NOT NULL,
  path text NOT NULL, cwd text NOT NULL, first_ts timestamptz, last_ts timestamptz, facts jsonb,
  published_by name NOT NULL DEFAULT current_user, published_at timestamptz NOT NULL DEFAULT now());
CREATE TABLE IF NOT EXISTS ctxd.messages(
  session_id text NOT NULL, entry_id text NOT NULL, ts timestamptz NOT NULL,
  project text NOT NULL, agent text NOT NULL, user_name text NOT NULL, machine text NOT NULL,
  line integer NOT NULL, role text NOT NULL, tool text NOT NULL, body text NOT NULL,
  tsv tsvector GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}'::regconfig, body)) STORED,
  published_by name NOT NULL DEFAULT current_user,
  PRIMARY KEY (session_id, entry_id, ts)
) PARTITION BY RANGE (ts);
CREATE INDEX IF NOT EXISTS sessions_project ON ctxd.sessions (project);
"""

BTREE_GIN = "CREATE EXTENSION IF NOT EXISTS btree_gin WITH SCHEMA ctxd"
"""Lets one GIN index hold a row's project beside its words (contrib's ``btree_gin``; a trusted extension: the
database's owner may create it)."""
INDEXES_BTREE_GIN = """
CREATE INDEX IF NOT EXISTS messages_project_tsv ON ctxd.messages USING gin (project, tsv)
  WITH (gin_pending_list_limit = 16384);
DROP INDEX IF EXISTS ctxd.messages_tsv;
DROP INDEX IF EXISTS ctxd.messages_project_ts;
"""
"""With ``btree_gin``: one GIN index on (project, tsv) serves a search with or without a project (a role's grants
or a filter); a row costs one index besides its key instead of two."""
INDEXES_PLAIN = """
CREATE INDEX IF NOT EXISTS messages_tsv ON ctxd.messages USING gin (tsv) WITH (gin_pending_list_limit = 16384);
CREATE INDEX IF NOT EXISTS messages_project_ts ON ctxd.messages (project, ts);
DROP INDEX IF EXISTS ctxd.messages_project_tsv;
"""
"""Without ``btree_gin`` (not installed on the server, or not allowed): a GIN index on the words and a B-tree on
(project, time), which the planner combines (a BitmapAnd) for a project's search."""

FUNCTIONS = f"""
CREATE OR REPLACE FUNCTION ctxd.caller() RETURNS name LANGUAGE sql STABLE
AS $$ SELECT (CASE current_setting('role') WHEN 'none' THEN session_user ELSE current_setting('role') END)::name $$;

CREATE OR REPLACE FUNCTION ctxd.is_admin(who name) RETURNS boolean
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$ SELECT coalesce((SELECT rolsuper FROM pg_roles WHERE rolname = who), false)
       OR pg_has_role(who, (SELECT relowner FROM pg_class WHERE oid = 'ctxd.messages'::regclass), 'MEMBER') $$;

-- The projects ``who`` is granted ('{{*}}': all); asked about another role than one's own, nothing.
CREATE OR REPLACE FUNCTION ctxd.projects_of(who name) RETURNS text[]
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
  SELECT CASE
    WHEN NOT (who = ctxd.caller() OR pg_has_role(ctxd.caller(), who, 'MEMBER')) THEN '{{}}'::text[]
    WHEN ctxd.is_admin(who) THEN '{{*}}'::text[]
    ELSE coalesce((SELECT array_agg(DISTINCT g.project) FROM ctxd.grants g JOIN pg_roles r ON r.rolname = g.role
                   WHERE pg_has_role(who, r.oid, 'MEMBER')), '{{}}'::text[]) END
$$;

CREATE OR REPLACE FUNCTION ctxd.sees_all() RETURNS boolean LANGUAGE sql STABLE
AS $$ SELECT '*' = ANY (ctxd.projects_of(current_user)) $$;

CREATE OR REPLACE FUNCTION ctxd.ensure_month(month date) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
  first date := date_trunc('month', month)::date;
  part text := 'messages_' || to_char(first, 'YYYY_MM');
BEGIN
  IF to_regclass('ctxd.' || part) IS NOT NULL THEN RETURN; END IF;
  PERFORM pg_advisory_xact_lock(hashtext('ctxd.' || part));
  EXECUTE format('CREATE TABLE IF NOT EXISTS ctxd.%I PARTITION OF ctxd.messages FOR VALUES FROM (%L) TO (%L)',
                 part, first::timestamptz, (first + interval '1 month')::timestamptz);
END $$;

CREATE OR REPLACE FUNCTION ctxd.drop_expired() RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
  months integer := coalesce((SELECT value::integer FROM ctxd.meta WHERE key = 'retention_months'), 0);
  cutoff timestamptz := now() - make_interval(months => months);
  part record;
  dropped integer := 0;
BEGIN
  IF months <= 0 THEN RETURN 0; END IF;
  FOR part IN
    SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'ctxd.messages'::regclass AND c.relname ~ '^messages_[0-9]{{4}}_[0-9]{{2}}$'
      AND to_date(substr(c.relname, 10), 'YYYY_MM') + interval '1 month' <= cutoff
  LOOP
    EXECUTE format('DROP TABLE ctxd.%I', part.relname);
    dropped := dropped + 1;
  END LOOP;
  RETURN dropped;
END $$;

-- Merge the GIN pending lists of these months' partitions into their indexes: a search reads a pending list
-- whole (16 MB of unsorted entries after a burst of publishing costs every search several ms per partition).
CREATE OR REPLACE FUNCTION ctxd.flush_pending(months date[]) RETURNS bigint
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET timezone = 'UTC'
AS $$
DECLARE
  idx regclass;
  merged bigint := 0;
BEGIN
  FOR idx IN
    SELECT x.indexrelid::regclass FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      JOIN pg_index x ON x.indrelid = c.oid JOIN pg_class xc ON xc.oid = x.indexrelid
      JOIN pg_am am ON am.oid = xc.relam
    WHERE i.inhparent = 'ctxd.messages'::regclass AND am.amname = 'gin'
      AND c.relname IN (SELECT 'messages_' || to_char(m, 'YYYY_MM') FROM unnest(months) m)
  LOOP
    merged := merged + gin_clean_pending_list(idx);
  END LOOP;
  RETURN merged;
END $$;

CREATE OR REPLACE FUNCTION ctxd.search(
  q text, lim integer DEFAULT 20, projects text[] DEFAULT NULL, agents text[] DEFAULT NULL,
  users text[] DEFAULT NULL, since timestamptz DEFAULT NULL, until timestamptz DEFAULT NULL,
  session text DEFAULT NULL)
RETURNS TABLE(session_id text, entry_id text, ts timestamptz, project text, agent text, user_name text,
  machine text, line integer, role text, tool text, path text, rank real, snippet text)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp SET timezone = 'UTC'
AS $fn$
DECLARE
  tq tsquery := websearch_to_tsquery('{TS_CONFIG}', q);
  seen text[] := ctxd.projects_of(ctxd.caller());
  cond text := '';
  months text := '';
  part record;
BEGIN
  IF numnode(tq) = 0 OR cardinality(seen) = 0 THEN RETURN; END IF;
  -- One condition on the project: the grants narrowed by the filter (two would both be index conditions, and
  -- the GIN index would read the posting lists of every granted project to intersect them: 8 ms instead of 0.1).
  IF '*' = ANY (seen) THEN
    IF projects IS NOT NULL THEN cond := cond || ' AND m.project = ANY ($3)'; END IF;
  ELSE
    IF projects IS NOT NULL THEN
      seen := ARRAY(SELECT unnest(seen) INTERSECT SELECT unnest(projects));
      IF cardinality(seen) = 0 THEN RETURN; END IF;
    END IF;
    cond := cond || ' AND m.project = ANY ($2)';
  END IF;
  IF agents IS NOT NULL THEN cond := cond || ' AND m.agent = ANY ($4)'; END IF;
  IF users IS NOT NULL THEN cond := cond || ' AND m.user_name = ANY ($5)'; END IF;
  IF since IS NOT NULL THEN cond := cond || ' AND m.ts >= $6'; END IF;
  IF until IS NOT NULL THEN cond := cond || ' AND m.ts < $7'; END IF;
  IF session IS NOT NULL THEN cond := cond || ' AND m.session_id = $8'; END IF;
  -- One branch per month, newest first; the outer LIMIT stops pulling (and so reading older months) once
  -- enough candidates are found.
  FOR part IN
    SELECT b.first, (b.first + interval '1 month')::timestamptz AS next
    FROM (SELECT to_date(substr(c.relname, 10), 'YYYY_MM')::timestamptz AS first
          FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
          WHERE i.inhparent = 'ctxd.messages'::regclass AND c.relname ~ '^messages_[0-9]{{4}}_[0-9]{{2}}$') b
    WHERE (since IS NULL OR b.first + interval '1 month' > since) AND (until IS NULL OR b.first < until)
    ORDER BY b.first DESC
  LOOP
    months := months || CASE WHEN months = '' THEN '' ELSE ' UNION ALL ' END || format(
      '(SELECT m.session_id, m.entry_id, m.ts, m.project, m.agent, m.user_name, m.machine, m.line, m.role,'
      ' m.tool, m.body, ts_rank_cd(m.tsv, $1, 1) AS rank FROM ctxd.messages m'
      ' WHERE m.ts >= %L AND m.ts < %L AND m.tsv @@ $1 %s LIMIT $10)', part.first, part.next, cond);
  END LOOP;
  IF months = '' THEN RETURN; END IF;
  RETURN QUERY EXECUTE format($q$
    WITH found AS MATERIALIZED (SELECT * FROM (%s) c LIMIT $10),
    hits AS (SELECT * FROM found ORDER BY rank DESC, ts DESC LIMIT $9)
    SELECT h.session_id, h.entry_id, h.ts, h.project, h.agent, h.user_name, h.machine, h.line, h.role, h.tool,
           coalesce(s.path, ''), h.rank,
           ts_headline('{TS_CONFIG}', left(h.body, {HEADLINE_CHARS}), $1, '{HEADLINE}')
    FROM hits h LEFT JOIN ctxd.sessions s ON s.session_id = h.session_id
    ORDER BY h.rank DESC, h.ts DESC$q$, months)
  USING tq, seen, projects, agents, users, since, until, session, greatest(1, least(lim, 200)), {CANDIDATES};
END $fn$;
"""

SECURITY = f"""
ALTER TABLE ctxd.messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE ctxd.sessions ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS messages_read ON ctxd.messages;
DROP POLICY IF EXISTS messages_insert ON ctxd.messages;
DROP POLICY IF EXISTS messages_update ON ctxd.messages;
DROP POLICY IF EXISTS sessions_read ON ctxd.sessions;
DROP POLICY IF EXISTS sessions_insert ON ctxd.sessions;
DROP POLICY IF EXISTS sessions_update ON ctxd.sessions;
CREATE POLICY messages_read ON ctxd.messages FOR SELECT USING ({_SEES});
CREATE POLICY messages_insert ON ctxd.messages FOR INSERT WITH CHECK (published_by = current_user AND ({_SEES}));
CREATE POLICY messages_update ON ctxd.messages FOR UPDATE USING (published_by = current_user AND ({_SEES}))
  WITH CHECK (published_by = current_user AND ({_SEES}));
CREATE POLICY sessions_read ON ctxd.sessions FOR SELECT USING ({_SEES});
CREATE POLICY sessions_insert ON ctxd.sessions FOR INSERT WITH CHECK (published_by = current_user AND ({_SEES}));
CREATE POLICY sessions_update ON ctxd.sessions FOR UPDATE USING (published_by = current_user AND ({_SEES}))
  WITH CHECK (published_by = current_user AND ({_SEES}));
REVOKE ALL ON ALL TABLES IN SCHEMA ctxd FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ctxd FROM PUBLIC;
GRANT USAGE ON SCHEMA ctxd TO {GROUP_ROLE};
GRANT SELECT ON ctxd.meta TO {GROUP_ROLE};
GRANT SELECT, INSERT, UPDATE ON ctxd.messages, ctxd.sessions TO {GROUP_ROLE};
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA ctxd TO {GROUP_ROLE};
"""

GROUP = f"""
DO $$ BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{GROUP_ROLE}') THEN CREATE ROLE {GROUP_ROLE} NOLOGIN; END IF;
END $$;
"""
