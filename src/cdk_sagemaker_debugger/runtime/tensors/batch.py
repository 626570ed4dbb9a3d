"""Reductions of one step waiting on their devices: one ``tolist()`` per device turns them into JSON-ready records."""


class Batch:
    def __init__(self):
        self.items = []  # (record, tensor, fields): fields is a tuple of names, or a str naming one list field

    def __len__(self):
        return len(self.items)

    def add(self, record, tensor, fields):
        self.items.append((record, tensor.reshape(-1), fields))

    def resolve(self, torch):
        """The records with their numbers filled in (non-finite numbers as strings); empties the batch."""
        items, self.items = self.items, []
        by_device = {}
        for index, (_record, tensor, _fields) in enumerate(items):
            by_device.setdefault(tensor.device, []).append(index)
        values = [None] * len(items)
        for indices in by_device.values():
            flat = torch.cat([items[i][1].double() for i in indices]).tolist()  # the one copy per device
            offset = 0
            for i in indices:
                size = items[i][1].numel()
                values[i] = flat[offset:offset + size]
                offset += size
        records = []
        for (record, _tensor, fields), numbers in zip(items, values):
            numbers = [json_number(v) for v in numbers]
            if isinstance(fields, str):
                record[fields] = numbers
            else:
                record.update(zip(fields, numbers))
            records.append(record)
        return records


def json_number(value):
    if value != value:
        return "nan"
    if value in (float("inf"), float("-inf")):
        return "inf" if value > 0 else "-inf"
    return int(value) if value.is_integer() and abs(value) < 2**53 else value
