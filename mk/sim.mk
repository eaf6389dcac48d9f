# sim.mk -- the deterministic simulator (tests/sim.c; the model and its invariants are in its
# header comment).
#   make sim                 100,000 seeds on 2 worker processes, a summary at the end
#   make sim SEED=N          replays seed N (TRACE=1: every traced event as it happens)
#   make sim SEEDS=N         N seeds, progress on stderr (FROM=S: start at seed S)
#   make sim-mutants         tests/sim_mutants.sh: planted protocol bugs, each caught
.PHONY: sim sim-mutants
SEEDS ?= 100000
FROM  ?= 1
$(B)/sim: tests/sim.c $(HDR_CORE) | $(B)
	$(CC) $(CFLAGS) -O2 -o $@ tests/sim.c -lpthread
all: $(B)/sim
test-core: $(B)/sim
sim: $(B)/sim
ifdef SEED
	$(B)/sim --seed $(SEED) $(if $(TRACE),--trace)
else
	$(B)/sim --seeds $(SEEDS) --from $(FROM) --progress
endif
sim-mutants:
	sh tests/sim_mutants.sh
