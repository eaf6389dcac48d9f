# lab.mk -- the network-namespace fault lab (tests/lab/lab.sh; needs root): every fault on
# Redis behind Sentinel, a ZooKeeper ensemble and PostgreSQL, 3 runs a row, the history of
# every run checked by mp_check. LAB_ARGS passes options (--seed N, --runs N, --only ROWS).
.PHONY: lab lab-short
lab: $(B)/mp_worker $(B)/mp_check $(B)/clockstep.so
	bash tests/lab/lab.sh $(LAB_ARGS)
lab-short: $(B)/mp_worker $(B)/mp_check $(B)/clockstep.so
	bash tests/lab/lab.sh --short $(LAB_ARGS)
# steps a Redis server's wall clock (LD_PRELOAD): the lab's server-clock-step row
$(B)/clockstep.so: tests/lab/clockstep.c
	@mkdir -p $(B)
	$(CC) -std=c99 $(WARN) -O1 -fPIC -shared -o $@ $<
