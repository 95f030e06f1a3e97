"""Query records turned into DeviceSample fields, and the slow views read for one chip."""

from __future__ import annotations

from soak.errors import ToolError


def sample_fields(*records: object) -> dict[tuple[int, int], dict[str, object]]:
    """Merge the DeviceSample fields of query records, keyed by ``(npu_id, chip_id)``.

    The result is the ``details`` argument of ``npu_smi.to_device_samples``.
    """
    merged: dict[tuple[int, int], dict[str, object]] = {}
    for rec in records:
        npu_id, chip_id = getattr(rec, "npu_id", None), getattr(rec, "chip_id", None)
        to_fields = getattr(rec, "sample_fields", None)
        if npu_id is None or chip_id is None or to_fields is None:
            continue
        merged.setdefault((npu_id, chip_id), {}).update(to_fields())
    return merged


def read_chip_details(reader, npu_id: int, chip_id: int, *, serial: bool = False) -> dict[str, object]:
    """DeviceSample fields for one chip from the slow views: usages, ECC and health, and the
    card's serial number (``-t board``) when ``serial`` (it does not change: read once).

    ``reader`` is an ``NpuSmiReader``. Card-level views (``usages``, ``ecc``) are asked for
    the whole card and filtered to ``chip_id``, because older npu-smi versions refuse ``-c``
    there. A timeout or missing tool is raised at once (the caller stops its pass); other
    failures of one view leave that view's fields out, and only if every view failed is the
    first failure raised.
    """
    fields: dict[str, object] = {}
    errors: list[ToolError] = []
    views = [
        lambda: reader.usages(npu_id),
        lambda: reader.ecc(npu_id),
        lambda: (reader.health(npu_id, chip_id),),
    ]
    if serial:
        views.append(lambda: (reader.board(npu_id),))
    for view in views:
        try:
            records = view()
        except ToolError as exc:
            if exc.kind in ("timeout", "missing"):
                raise
            errors.append(exc)
            continue
        for rec in records:
            if rec.chip_id in (chip_id, None):
                fields.update(rec.sample_fields())
    if errors and len(errors) == len(views):
        raise errors[0]
    return fields
