"""ZooKeeper: the only package importing kazoo.

- ``client``    ``ZkClient``: asyncio facade over one kazoo session (bridged futures, hopped callbacks,
                kept watches, epoch-fenced transactions), the ``ZkError`` tree
- ``paths``     every znode: path + codec, one class per node
- ``election``  candidate nodes, predecessor watch, ``fence_become_leader``
"""
