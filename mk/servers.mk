# servers.mk -- Redis, ZooKeeper and PostgreSQL on loopback, to try simba by hand. Uses B.
#   make servers          start the three (scripts/*-start.sh) and print the URL of each
#   make servers-stop     stop them by the PIDs their start scripts wrote (PostgreSQL's data goes)
#   SERVERS_DIR ($(B)/servers)  SERVERS_REDIS_PORT (6379)  SERVERS_ZK_PORT (2181)
#   SERVERS_PG_PORT (5432): a port in use by another server makes its start fail
SERVERS_DIR        ?= $(B)/servers
SERVERS_REDIS_PORT ?= 6379
SERVERS_ZK_PORT    ?= 2181
SERVERS_PG_PORT    ?= 5432

.PHONY: servers servers-stop
servers:
	@sh scripts/redis-start.sh $(SERVERS_REDIS_PORT) $(SERVERS_DIR)/redis >/dev/null
	@bash scripts/zk-start.sh $(SERVERS_ZK_PORT) $(SERVERS_DIR)/zk >/dev/null
	@sh scripts/pg-start.sh $(SERVERS_PG_PORT) $(SERVERS_DIR)/pg >/dev/null
	@echo "export SIMBA_URL=redis://127.0.0.1:$(SERVERS_REDIS_PORT)/0"
	@echo "export SIMBA_URL=zk://127.0.0.1:$(SERVERS_ZK_PORT)/simba"
	@echo "export SIMBA_URL=postgres://postgres@127.0.0.1:$(SERVERS_PG_PORT)/postgres PGPASSWORD=simba"
	@echo "then: $(B)/simba run demo -- sleep 5 (make $(B)/simba); make servers-stop stops them"

servers-stop:
	@[ ! -f $(SERVERS_DIR)/redis/redis.pid ] || sh scripts/redis-stop.sh $(SERVERS_DIR)/redis
	@[ ! -f $(SERVERS_DIR)/zk/zk.pid ] || bash scripts/zk-stop.sh $(SERVERS_DIR)/zk
	@[ ! -s $(SERVERS_DIR)/pg/datadir ] || sh scripts/pg-stop.sh $(SERVERS_DIR)/pg
