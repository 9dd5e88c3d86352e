"""The Lua scripts the Upstash adapter runs (no I/O).

None of them builds JSON: Lua's cjson cannot tell ``[]`` from ``{}`` and prints
numbers with 14 significant digits, so JSON is only ever written by Python and
the writing scripts move opaque document text. Only :data:`OWNED_THREADS`, which
writes nothing, decodes documents (to compare their ``resourceId``). Each write is a
compare-and-set: the script replaces the document (and maintains the thread
indexes) only if the stored text is still what Python read, and otherwise
returns the current text so Python can recompute and try again. A script also
succeeds when the stored text already equals the new text, which makes every
write safe to repeat when the client retries a request whose response was lost.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

__all__ = [
    "ADD_IDS",
    "CAS_DELETE",
    "CAS_SET",
    "ERASE_RESOURCE",
    "ERASE_THREADS",
    "ID_PAGE",
    "INDEX_IF_UNCHANGED",
    "INSERT_ABSENT",
    "INSERT_VERSIONS",
    "LIST_PAGE",
    "OWNED_THREADS",
    "PUT",
    "SCRIPTS",
    "UNINDEX_IF_UNCHANGED",
    "Script",
]


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script and its SHA-1 (for ``EVALSHA``)."""

    name: str
    source: str
    sha1: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha1", hashlib.sha1(self.source.encode("utf-8")).hexdigest())


# A script's earlier writes stay when a later call of it fails: the writing scripts check that the
# owner's index keys are sorted sets (or absent) before they write anything.
_CHECK_INDEXES = """
local function check_type(key, wanted, what)
  local kind = redis.call('TYPE', key).ok
  if kind ~= wanted and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE ' .. key .. ' holds a ' .. kind .. ', not a ' .. what .. ': nothing changed')
  end
end
local function check_sorted_set(key)
  return check_type(key, 'zset', 'sorted set')
end
local function check_indexes(first, last)
  for i = first, last or #KEYS do
    local refused = check_sorted_set(KEYS[i])
    if refused then return refused end
  end
end
"""

# History (see .keys): a working memory's versions are one sorted set, member '{version}:{payload}', score =
# version; the resource's set of history keys names it. ``record`` numbers the new version one above the newest,
# adds it, drops what retention says is over (every version below ``newest - keep + 1``), all in the caller's
# script. The payload carries a token of the write: a request the driver re-sends after a lost response finds its
# own version already newest (``recorded``) and records nothing more.
_HISTORY = """
local function check_history(history, index)
  return check_sorted_set(history) or check_type(index, 'set', 'set')
end
local function recorded(history, payload)
  local newest = redis.call('ZREVRANGE', history, 0, 0)[1]
  local tail = ':' .. payload
  return newest ~= nil and #newest > #tail and string.sub(newest, -#tail) == tail
end
local function record(history, index, payload, keep)
  local newest = redis.call('ZREVRANGE', history, 0, 0, 'WITHSCORES')
  local number = 1
  if newest[2] then number = tonumber(newest[2]) + 1 end
  local version = string.format('%d', number)
  redis.call('ZADD', history, version, version .. ':' .. payload)
  if keep ~= '' and number - tonumber(keep) >= 1 then
    redis.call('ZREMRANGEBYSCORE', history, '-inf', '(' .. string.format('%d', number - tonumber(keep) + 1))
  end
  redis.call('SADD', index, history)
  return number
end
local function erase_history(history, index)
  local count = redis.call('ZCARD', history)
  redis.call('DEL', history)
  redis.call('SREM', index, history)
  return count
end
"""

CAS_SET = Script(
    "cas_set",
    _CHECK_INDEXES
    + _HISTORY
    + """
-- KEYS[1] document; KEYS[2] the id set of its kind (resources or threads);
-- KEYS[3], KEYS[4] (threads only) created_at and updated_at indexes of the owner;
-- then, when the write records a version: the history key, the owner's set of history keys (the last two).
-- ARGV: expected exists ('0'/'1'), expected text, new text, id, then created ms, updated ms (threads; '' for a
-- resource that records), then when recording: the version's payload, keep ('' keeps all).
local record_it = ARGV[7] ~= nil
local n = #KEYS
if record_it then n = n - 2 end
local current = redis.call('GET', KEYS[1])
local matches
if current == ARGV[3] then
  if record_it and recorded(KEYS[n + 1], ARGV[7]) then return {1} end  -- this very write, re-sent
  matches = true
elseif ARGV[1] == '0' then
  matches = current == false
else
  matches = current == ARGV[2]
end
if not matches then
  if current == false then return {0} end
  return {0, current}
end
local refused = check_indexes(2, n)
if not refused and record_it then refused = check_history(KEYS[n + 1], KEYS[n + 2]) end
if refused then return refused end
redis.call('SET', KEYS[1], ARGV[3])
if n >= 2 then
  redis.call('ZADD', KEYS[2], 0, ARGV[4])
end
if n == 4 then
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[4])
  redis.call('ZADD', KEYS[4], ARGV[6], ARGV[4])
end
if record_it then record(KEYS[n + 1], KEYS[n + 2], ARGV[7], ARGV[8]) end
return {1}
""",
)

CAS_DELETE = Script(
    "cas_delete",
    _CHECK_INDEXES
    + _HISTORY
    + """
-- KEYS[1] thread document, KEYS[2] the thread id set, KEYS[3], KEYS[4] its owner's indexes,
-- KEYS[5] the thread's history, KEYS[6] the owner's set of history keys (both optional);
-- ARGV[1] expected text, ARGV[2] thread id. The thread's history goes with it.
local current = redis.call('GET', KEYS[1])
if current ~= false and current ~= ARGV[1] then return {0, current} end
local refused = check_indexes(2, 4)
if not refused and #KEYS >= 6 then refused = check_history(KEYS[5], KEYS[6]) end
if refused then return refused end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[2])
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('ZREM', KEYS[4], ARGV[2])
if #KEYS >= 6 then erase_history(KEYS[5], KEYS[6]) end
if current == false then return {1, 0} end
return {1, 1}
""",
)

PUT = Script(
    "put",
    _CHECK_INDEXES
    + """
-- KEYS[1] resource document, KEYS[2] the resource id set; ARGV[1] new text, ARGV[2] id
local refused = check_indexes(2)
if refused then return refused end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], 0, ARGV[2])
return 1
""",
)

INSERT_ABSENT = Script(
    "insert_absent",
    _CHECK_INDEXES
    + """
-- Insert each record whose document is missing; leave every present one as it is (whoever owns it).
-- KEYS[1] the id set of the kind; then per record, ARGV[1] keys each (1: resources, 3: threads):
-- its document and, for threads, the owner's created_at and updated_at indexes.
-- ARGV after the first, per record (ARGV[1] + 1 each): id, document text, then for threads: created ms, updated ms.
-- Returns the ids that were present. Every sorted set is checked before anything is written.
local width = tonumber(ARGV[1])
local count = (#KEYS - 1) / width
local refused = check_sorted_set(KEYS[1])
if refused then return refused end
if width == 3 then
  for i = 1, count do
    local base = 1 + (i - 1) * 3
    refused = check_sorted_set(KEYS[base + 2]) or check_sorted_set(KEYS[base + 3])
    if refused then return refused end
  end
end
local present = {}
for i = 1, count do
  local base = 1 + (i - 1) * width
  local arg = 2 + (i - 1) * (width + 1)
  local id = ARGV[arg]
  if redis.call('EXISTS', KEYS[base + 1]) == 1 then
    present[#present + 1] = id
  else
    redis.call('SET', KEYS[base + 1], ARGV[arg + 1])
    redis.call('ZADD', KEYS[1], 0, id)
    if width == 3 then
      redis.call('ZADD', KEYS[base + 2], ARGV[arg + 2], id)
      redis.call('ZADD', KEYS[base + 3], ARGV[arg + 3], id)
    end
  end
end
return present
""",
)

ADD_IDS = Script(
    "add_ids",
    """
-- KEYS[1] an id set; ARGV[1] what the kind's document keys start with; ARGV[2..] ids found by SCAN.
-- Adds each id whose document exists now (one deleted since the SCAN stays out). Returns how many were new.
local added = 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ARGV[i]) == 1 then
    added = added + redis.call('ZADD', KEYS[1], 0, ARGV[i])
  end
end
return added
""",
)

ID_PAGE = Script(
    "id_page",
    """
-- KEYS[1] an id set; ARGV[1] what the kind's document keys start with, ARGV[2] '' (from the first id) or
-- the last id of the previous page, ARGV[3] limit. The ids after ARGV[2] in byte order, at most ARGV[3],
-- from one snapshot: {id1, state1, text1, ...}; state 'd' a document (text), 'x' a key that is not a string,
-- 'm' no document (deleted by a writer that keeps no id set: its id is removed from the set here).
local low = '-'
if ARGV[2] ~= '' then low = '(' .. ARGV[2] end
local ids = redis.call('ZRANGEBYLEX', KEYS[1], low, '+', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local value = redis.pcall('GET', ARGV[1] .. id)
  out[#out + 1] = id
  if type(value) == 'table' and value.err then
    out[#out + 1] = 'x'
    out[#out + 1] = ''
  elseif value == false then
    redis.call('ZREM', KEYS[1], id)
    out[#out + 1] = 'm'
    out[#out + 1] = ''
  else
    out[#out + 1] = 'd'
    out[#out + 1] = value
  end
end
return out
""",
)

LIST_PAGE = Script(
    "list_page",
    """
-- KEYS[1] index; ARGV[1] thread key start, ARGV[2] start rank, ARGV[3] stop rank, ARGV[4] 'asc'/'desc'
-- Returns {total, id1, doc1, id2, doc2, ...} from one snapshot; a missing document is ''.
local ids
if ARGV[4] == 'desc' then
  ids = redis.call('ZREVRANGE', KEYS[1], ARGV[2], ARGV[3])
else
  ids = redis.call('ZRANGE', KEYS[1], ARGV[2], ARGV[3])
end
local out = {redis.call('ZCARD', KEYS[1])}
for _, id in ipairs(ids) do
  out[#out + 1] = id
  out[#out + 1] = redis.call('GET', ARGV[1] .. id) or ''
end
return out
""",
)

INDEX_IF_UNCHANGED = Script(
    "index_if_unchanged",
    """
-- For each thread i: KEYS[3i-2] document, KEYS[3i-1], KEYS[3i] owner's indexes;
-- ARGV[4i-3] document text as read, ARGV[4i-2] id, ARGV[4i-1] created ms, ARGV[4i] updated ms.
local done = 0
for i = 1, #KEYS / 3 do
  if redis.call('GET', KEYS[3 * i - 2]) == ARGV[4 * i - 3] then
    redis.call('ZADD', KEYS[3 * i - 1], ARGV[4 * i - 1], ARGV[4 * i - 2])
    redis.call('ZADD', KEYS[3 * i], ARGV[4 * i], ARGV[4 * i - 2])
    done = done + 1
  end
end
return done
""",
)

UNINDEX_IF_UNCHANGED = Script(
    "unindex_if_unchanged",
    """
-- For each entry i: KEYS[2i-1] thread document, KEYS[2i] index;
-- ARGV[2i-1] document text as read ('' when missing), ARGV[2i] thread id.
local done = 0
for i = 1, #KEYS / 2 do
  local current = redis.call('GET', KEYS[2 * i - 1]) or ''
  if current == ARGV[2 * i - 1] then
    done = done + redis.call('ZREM', KEYS[2 * i], ARGV[2 * i])
  end
end
return done
""",
)

OWNED_THREADS = Script(
    "owned_threads",
    """
-- KEYS: thread documents (one SCAN batch); ARGV[1] a resource id; ARGV[2] '' or the id as a JSON string
-- without escapes ("id"); ARGV[3..] the escapes that could spell the id otherwise ('\\u', and '\\/' for an
-- id with a '/'). Reads only. Returns {key1, text1, key2, text2, ...}: each document whose "resourceId" is
-- ARGV[1], and each that cjson cannot decode (Python decides); missing keys and keys that are not strings
-- are left out. A document holding neither ARGV[2] nor any of ARGV[3..] cannot hold the id as any string
-- value, so it is left out without being decoded. cjson only reads here; a server without it returns every
-- document that may hold the id.
local has_cjson, json = pcall(function() return cjson end)
local function may_hold_id(value)
  if ARGV[2] == '' or string.find(value, ARGV[2], 1, true) then return true end
  for i = 3, #ARGV do
    if string.find(value, ARGV[i], 1, true) then return true end
  end
  return false
end
local out = {}
for i = 1, #KEYS do
  local value = redis.pcall('GET', KEYS[i])
  if type(value) == 'string' and may_hold_id(value) then
    local keep = true
    if has_cjson and json then
      local ok, doc = pcall(json.decode, value)
      if ok then keep = type(doc) == 'table' and doc.resourceId == ARGV[1] end
    end
    if keep then
      out[#out + 1] = KEYS[i]
      out[#out + 1] = value
    end
  end
end
return out
""",
)

INSERT_VERSIONS = Script(
    "insert_versions",
    _CHECK_INDEXES
    + _HISTORY
    + """
-- Import versions as given. Per version i: KEYS[2i-1] its history, KEYS[2i] the owner's set of history keys;
-- ARGV[2i-1] the version number, ARGV[2i] its payload. A number already present in that history is skipped.
-- Returns how many were added. Every key's type is checked before anything is written.
for i = 1, #KEYS / 2 do
  local refused = check_history(KEYS[2 * i - 1], KEYS[2 * i])
  if refused then return refused end
end
local added = 0
for i = 1, #KEYS / 2 do
  local history, number = KEYS[2 * i - 1], ARGV[2 * i - 1]
  if redis.call('ZCOUNT', history, number, number) == 0 then
    redis.call('ZADD', history, number, number .. ':' .. ARGV[2 * i])
    redis.call('SADD', KEYS[2 * i], history)
    added = added + 1
  end
end
return added
""",
)

ERASE_THREADS = Script(
    "erase_threads",
    _CHECK_INDEXES
    + _HISTORY
    + """
-- delete_resource, its threads (one batch). KEYS[1] the thread id set, KEYS[2], KEYS[3] the resource's
-- created_at and updated_at indexes, KEYS[4] its set of history keys; per thread i: KEYS[3 + 2i] its document,
-- KEYS[4 + 2i] its history. ARGV[2i-1] the thread id, ARGV[2i] its document text as read (the owner checked
-- on it). Each thread still holding that text is deleted with its index entries and history (a
-- compare-and-set each); one already gone has its index entries and history removed. Returns
-- {versions, id1, state1, text1, ...}: state 'd' deleted, 'g' gone already, 'c' changed since it was read
-- (text: the current document).
local refused = check_indexes(1, 3) or check_type(KEYS[4], 'set', 'set')
if refused then return refused end
for i = 1, (#KEYS - 4) / 2 do
  refused = check_sorted_set(KEYS[4 + 2 * i])
  if refused then return refused end
end
local out = {0}
for i = 1, (#KEYS - 4) / 2 do
  local id = ARGV[2 * i - 1]
  local current = redis.pcall('GET', KEYS[3 + 2 * i])
  out[#out + 1] = id
  if type(current) == 'table' then  -- not a string: no thread, left as it is
    out[#out + 1] = 'c'
    out[#out + 1] = ''
  elseif current ~= false and current ~= ARGV[2 * i] then
    out[#out + 1] = 'c'
    out[#out + 1] = current
  else
    -- the thread, or an index entry and history left by a thread another program deleted
    if current == false then
      out[#out + 1] = 'g'
    else
      redis.call('DEL', KEYS[3 + 2 * i])
      out[#out + 1] = 'd'
    end
    redis.call('ZREM', KEYS[1], id)
    redis.call('ZREM', KEYS[2], id)
    redis.call('ZREM', KEYS[3], id)
    out[1] = out[1] + erase_history(KEYS[4 + 2 * i], KEYS[4])
    out[#out + 1] = ''
  end
end
return out
""",
)

ERASE_RESOURCE = Script(
    "erase_resource",
    _CHECK_INDEXES
    + _HISTORY
    + """
-- delete_resource, the last step. KEYS[1] the resource document, KEYS[2] the resource id set, KEYS[3], KEYS[4]
-- its created_at and updated_at thread indexes, KEYS[5] its set of history keys; ARGV[1] the resource id,
-- ARGV[2] what thread document keys start with, then pairs: a thread id in the index that is not this
-- resource's (another program moved or re-created it) and its document text as read. Every index entry must be
-- accounted for: its document gone (or not a string), or still that other owner's text. Otherwise a thread of
-- this resource was created since its threads were erased: {0, id1, id2, ...}, nothing changed (erase those
-- first). Else the document, its id, both indexes and every history key the set names (both scopes, also of
-- threads another program deleted) go: {1, existed (0/1), versions removed}.
local refused = check_indexes(2, 4) or check_type(KEYS[5], 'set', 'set')
if refused then return refused end
local foreign = {}
for i = 3, #ARGV, 2 do foreign[ARGV[i]] = ARGV[i + 1] end
local left = {0}
for _, id in ipairs(redis.call('ZRANGE', KEYS[3], 0, -1)) do
  local current = redis.pcall('GET', ARGV[2] .. id)
  if type(current) == 'string' and current ~= foreign[id] then left[#left + 1] = id end
end
if #left > 1 then return left end
local existed = redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3])
redis.call('DEL', KEYS[4])
local versions = 0
for _, history in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  local count = redis.pcall('ZCARD', history)
  if type(count) == 'number' then versions = versions + count end
  redis.call('DEL', history)
end
redis.call('DEL', KEYS[5])
return {1, existed, versions}
""",
)

SCRIPTS: tuple[Script, ...] = (
    CAS_SET,
    CAS_DELETE,
    PUT,
    LIST_PAGE,
    INDEX_IF_UNCHANGED,
    UNINDEX_IF_UNCHANGED,
    INSERT_ABSENT,
    ADD_IDS,
    ID_PAGE,
    OWNED_THREADS,
    INSERT_VERSIONS,
    ERASE_THREADS,
    ERASE_RESOURCE,
)
"""Every script the adapter runs (cached on the server when a storage opens)."""
