import { defineConfig } from 'vitest/config'

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    restoreMocks: true,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // two files at once on CI's 2 cores: a serial run used under half of them (the tests mostly wait on
    // the simulator and the real tools); each file has its own 127.x.y range, so they never meet
    maxWorkers: 2,
  },
})
