"""Edits of a nested dict/list tree (a checkpoint's envelope or payload), made now and applied later: the
checkpoint writers' variants are built from them."""


def _parent(tree, keys):
    """The container that holds keys[-1], reached by walking keys[:-1] (dict keys and list indices)."""
    for key in keys[:-1]:
        tree = tree[key]
    return tree


def set_key(*keys_and_value):
    """An edit that sets the nested key keys_and_value[:-1] to keys_and_value[-1]."""
    *keys, value = keys_and_value

    def edit(tree):
        _parent(tree, keys)[keys[-1]] = value
    return edit


def delete_key(*keys):
    """An edit that deletes the nested key `keys`."""
    def edit(tree):
        del _parent(tree, keys)[keys[-1]]
    return edit
