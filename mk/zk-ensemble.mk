# zk-ensemble.mk -- ZooKeeper on a 3-node ensemble, part of make test-scale. Uses B.
#   make test-scale-zk   the shared kit on a 3-node ensemble, then the fault harness on one
#                        (leader killed, the clients' follower killed, quorum lost), then an owner cut off from a frozen leader: ~3 min
#   make test-scale      runs it (other topologies add their own test-scale:: rules)
.PHONY: test-scale-zk test-scale
test-scale-zk: $(B)/kit_zk $(B)/mp_worker $(B)/mp_check
	@bash tests/test_zk_ensemble.sh
test-scale:: test-scale-zk
