# zk.mk -- ZooKeeper backend extras. Uses CC, CXX, B from the Makefile.
# simba_zk.h builds the documented way: no -I, no -D (it includes <zookeeper/zookeeper.h>;
# -DTHREADED only declares the client's synchronous API, which simba does not use).
ZK_DOC_WARN = -Wall -Wextra -Wpedantic -Werror
$(B)/zk_include_c: tests/zk_include.c simba.h simba_zk.h | $(B)
	$(CC) -std=c99 $(ZK_DOC_WARN) -o $@ tests/zk_include.c -lzookeeper_mt -lpthread
$(B)/zk_include_cxx: tests/zk_include.c simba.h simba_zk.h | $(B)
	$(CXX) -std=c++11 $(ZK_DOC_WARN) -x c++ tests/zk_include.c -x none -o $@ -lzookeeper_mt -lpthread
all: $(B)/zk_include_c $(B)/zk_include_cxx
