"""``gpumosaic slurm setup``: what a Slurm cluster needs so that ``gpumosaic serve
--executor slurm --slurm-partition P`` adopts the jobs users submit to partition ``P``
(docs/slurm.md), added to an existing ``slurm.conf`` and written beside it. Idempotent: a
second run changes nothing.

- ``slurm.conf``: ``JobSubmitPlugins`` includes ``lua``; partition ``P`` exists (when it
  does not, it is added on every node: ``Nodes=ALL``). Each added line is marked
  ``# gpumosaic``; nothing else of the file is changed.
- ``job_submit.lua`` beside it: a job submitted to ``P`` (other than the service's own
  lease jobs, named ``gpumosaic-...`` and submitted by the service's user) is held
  (priority 0) until gpumosaic starts it, and no one but root may change or release a
  job of ``P`` (``scontrol release`` by its user is refused): no job of ``P`` ever
  starts behind gpumosaic's back. An existing ``job_submit.lua`` not written by gpumosaic
  is left alone and the setup stops, saying so (merge it by hand: docs/slurm.md).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gpumosaic.errors import InputError

MARK = "# gpumosaic"
LUA_MARK = "-- gpumosaic slurm setup"
_PARTITION = re.compile(r"^\s*PartitionName\s*=\s*(\S+)", re.IGNORECASE)
_PLUGINS = re.compile(r"^(\s*JobSubmitPlugins\s*=\s*)(\S*)(.*)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")

LUA = """{mark}: jobs of partition {partition!r} wait until gpumosaic starts them.
-- Written by `gpumosaic slurm setup`; rewritten by it (edit docs/slurm.md's copy instead).
local PARTITION = "{partition}"
local SERVICE_UID = {uid}
local OWN_PREFIX = "gpumosaic-"

local function in_partition(name)
  if name == nil then return false end
  for part in string.gmatch(name, "[^,]+") do
    if part == PARTITION then return true end
  end
  return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not in_partition(job_desc.partition) then return slurm.SUCCESS end
  local own = submit_uid == SERVICE_UID and job_desc.name ~= nil
    and string.sub(job_desc.name, 1, #OWN_PREFIX) == OWN_PREFIX
  if not own then
    job_desc.priority = 0 -- held: gpumosaic releases it when it decides to run it
  end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if modify_uid ~= 0 and modify_uid ~= SERVICE_UID
      and (in_partition(job_rec.partition) or in_partition(job_desc.partition)) then
    slurm.log_user("jobs of partition %s are started by gpumosaic", PARTITION)
    return slurm.ERROR
  end
  return slurm.SUCCESS
end

return slurm.SUCCESS
"""


@dataclass(frozen=True, slots=True)
class SetupResult:
    conf: Path
    lua: Path
    changed: tuple[str, ...]  # what was added or written ('' : nothing)


def setup(conf: Path, partition: str, service_uid: int = 0) -> SetupResult:
    if not _NAME.match(partition):
        raise InputError("is not a Slurm partition name", field="--partition", value=partition)
    try:
        text = conf.read_text()
    except OSError as err:
        raise InputError(
            f"cannot read it: {err.strerror}", field="--conf", value=str(conf)
        ) from None
    lines = text.splitlines()
    changed: list[str] = []
    plugins = [i for i, line in enumerate(lines) if _PLUGINS.match(line.split("#")[0])]
    if plugins:
        i = plugins[-1]
        head, value, rest = _PLUGINS.match(lines[i].split("#")[0]).groups()  # type: ignore[union-attr]
        names = [n for n in value.split(",") if n]
        if "lua" not in names:
            lines[i] = f"{head}{','.join([*names, 'lua'])}{rest}  {MARK}: lua added"
            changed.append("JobSubmitPlugins: lua added")
    else:
        lines.append(f"JobSubmitPlugins=lua  {MARK}")
        changed.append("JobSubmitPlugins=lua")
    if not any((m := _PARTITION.match(line)) and m.group(1) == partition for line in lines):
        lines.append(f"PartitionName={partition} Nodes=ALL State=UP MaxTime=INFINITE  {MARK}")
        changed.append(f"PartitionName={partition} (on every node)")
    lua = conf.with_name("job_submit.lua")
    body = LUA.format(mark=LUA_MARK, partition=partition, uid=service_uid)
    if lua.exists():
        old = lua.read_text()
        if not old.startswith(LUA_MARK):
            raise InputError(
                f"{lua} exists and was not written by gpumosaic: merge docs/slurm.md's "
                "job_submit.lua into it by hand",
                field="--conf",
            )
        if old != body:
            changed.append(f"{lua.name} rewritten")
    else:
        changed.append(f"{lua.name} written")
    if changed:
        _write(lua, body, 0o644)
        new = "\n".join(lines) + "\n"
        if new != text:
            _write(conf, new, conf.stat().st_mode & 0o777)
    return SetupResult(conf, lua, tuple(changed))


def _write(path: Path, text: str, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.gpumosaic-tmp")
    tmp.write_text(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)
