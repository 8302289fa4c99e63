#!/bin/sh
# Writes zoo.cfg and myid from the official image's variables, then runs ZooKeeper in the foreground.
set -eu
: "${ZOO_MY_ID:?ZOO_MY_ID is not set}"
conf=/etc/zookeeper/conf/zoo.cfg
{
  echo "dataDir=/data"
  echo "dataLogDir=/datalog"
  echo "tickTime=${ZOO_TICK_TIME:-2000}"
  echo "initLimit=${ZOO_INIT_LIMIT:-5}"
  echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
  echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
  echo "clientPort=2181"
  for server in ${ZOO_SERVERS:-server.1=localhost:2888:3888;2181}; do echo "$server"; done
} > "$conf"
echo "$ZOO_MY_ID" > /data/myid
exec zkServer.sh start-foreground
