.PHONY: run test setup
run:   ## set up everything and run web + one worker per demo pool + beat
	scripts/run.sh
test:  ## set up and run the whole test suite
	scripts/test.sh
setup:
	scripts/setup.sh --dev
