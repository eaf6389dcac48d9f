# readme.mk -- the README's code blocks built as C99 and C++11, the #error for a system
# header first, and the examples' Ctrl-C handoff (tests/readme_blocks.sh).
# Uses the Makefile's B. `make readme-test` builds what it needs and runs it.
.PHONY: readme-test
readme-test: $(B)/leader_demo $(B)/tick_loop $(B)/poll_loop
	sh tests/readme_blocks.sh $(B)
