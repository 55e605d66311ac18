//! redislock (skeleton)
